#!/usr/bin/env python3
"""PyTorch pipeline-parallel reference run for `ddx train --strategy pp` (pp_reference_test).

Trains ddx's GPT-2 with PyTorch's own pipelining (torch.distributed.pipelining: PipelineStage
with ScheduleGPipe or Schedule1F1B; Gloo on 127.0.0.1, CPU, one stage per rank, 2 ranks) from
the same initial weights, on the same tokens, with the same loss normalisation, optimizer and
learning-rate schedule as `ddx train`, and writes the per-step losses and gradient norms as JSON
(the record of tp_reference.py).

The model, data, schedule, optimizer and processes are reference_training.py's.

The split: stage 0 runs the embeddings and blocks [0, --split); stage 1 runs the remaining
blocks, the final norm and the head (ddx's --pp-split places the same cut). The loss function
is the summed token cross-entropy times 1 / (tokens of the whole batch), with the schedule's
own gradient scaling off (scale_grads=False): every micro-batch's gradient is already a share
of the global-token mean. A tied embedding is held twice, by stage 0 (wte) and by stage 1 (the
head's weight, a copy): their gradients are summed over the pipeline after each step and both
copies take the same update (Megatron's embedding group).

Gradient norm: each stage's squares summed over the pipeline, the head's copy of a tied wte not
counted. Final weights: every parameter from the stage that holds it, gathered to rank 0.

  pp_reference.py --data data.txt --init init.safetensors --model config.json --seq-length 32 \
      --batch-size 8 --microbatches 4 --schedule 1f1b --split 4 --steps 20 --lr 3e-3 --out losses.json [--dtype fp64]
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_training as rt  # noqa: E402


class FirstStage(nn.Module):
    def __init__(self, model, cut):
        super().__init__()
        self.embed = model.embed
        self.blocks = nn.ModuleList(model.blocks[:cut])

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return x


class LastStage(nn.Module):
    def __init__(self, model, cut):
        super().__init__()
        self.blocks = nn.ModuleList(model.blocks[cut:])
        self.ln_f = model.ln_f
        self.lm_head = model.lm_head
        if model.tied:
            # The head's own copy of wte (stage 0 holds the other).
            self.lm_head.weight = nn.Parameter(model.embed.wte.weight.detach().clone())

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def train(rank, world, args):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    if world != 2:
        raise SystemExit("this reference runs one stage per rank on 2 ranks")
    cfg, model = rt.build_model(args)
    stage_module = FirstStage(model, args.split) if rank == 0 else LastStage(model, args.split)
    stage = PipelineStage(stage_module, rank, world, torch.device("cpu"))

    blocks = rt.global_blocks(rt.read_tokens(args.data), args.seq_length, args.batch_size)
    inputs, labels = blocks[:, :-1].contiguous(), blocks[:, 1:].contiguous()
    args.global_tokens = labels.numel()
    sums = []

    def loss_fn(logits, target):
        loss_sum = F.cross_entropy(logits.flatten(0, 1), target.reshape(-1), reduction="sum")
        sums.append(loss_sum.detach().double())
        return loss_sum * (1.0 / args.global_tokens)

    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[args.schedule]
    schedule = kind(stage, n_microbatches=args.microbatches, loss_fn=loss_fn, scale_grads=False)
    optimizer = rt.adamw(stage_module, args)
    tied = model.tied

    def step_loss():
        sums.clear()
        if rank == 0:
            schedule.step(inputs)
        else:
            schedule.step(target=labels)
        if tied:
            copy = stage_module.embed.wte.weight if rank == 0 else stage_module.lm_head.weight
            dist.all_reduce(copy.grad)
        sq = torch.zeros((), dtype=torch.float64)
        for name, p in stage_module.named_parameters():
            if p.grad is not None and not (tied and name == "lm_head.weight"):
                sq += p.grad.double().pow(2).sum()
        dist.all_reduce(sq)
        loss_sum = torch.stack(sums).sum() if sums else torch.zeros((), dtype=torch.float64)
        dist.broadcast(loss_sum, 1)
        return loss_sum.item(), sq.item()

    record = rt.train_steps(stage_module, optimizer, args, step_loss)
    # Every parameter from its stage to rank 0's full model.
    with torch.no_grad():
        held = set(id(p) for p in stage_module.parameters())
        for name, p in model.named_parameters():
            if name == "lm_head.weight" and tied:
                continue
            owner = rank if id(p) in held else 1 - rank
            dist.broadcast(p.data, owner)
    if rank == 0:
        model.tie()
    rt.write_results(model, args, record)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rt.add_common_args(p)
    p.add_argument("--batch-size", type=int, required=True, help="sequences per step (ddx's -b)")
    p.add_argument("--microbatches", type=int, required=True)
    p.add_argument("--schedule", choices=["gpipe", "1f1b"], required=True)
    p.add_argument("--split", type=int, required=True, help="first block of stage 1")
    rt.launch(train, p.parse_args())


if __name__ == "__main__":
    main()
