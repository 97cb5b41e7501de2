#!/usr/bin/env python3
"""PyTorch FSDP2 reference run for `ddx train --strategy fsdp` (fsdp_reference_test).

Trains ddx's GPT-2 with PyTorch's own FSDP2 (torch.distributed.fsdp.fully_shard on every block,
then on the root; Gloo on 127.0.0.1, CPU) from the same initial weights, on the same tokens,
with the same loss normalisation, optimizer and learning-rate schedule as `ddx train`, and
writes the per-step losses as JSON.

The model, data, schedule, optimizer and processes are reference_training.py's (shared with
tp_reference.py); the model's math comes from reference_models.py, written independently of
the C++ code.

Identical batches. ddx's sampler shuffles the blocks of each epoch with its own PRNG; rather
than reimplementing it, the data must hold exactly one global batch of blocks:
num_blocks = (tokens - 1) // seq_length == ranks x batch_size. Then every step trains on all
blocks, and the loss and the summed gradient do not depend on which rank reads which block.
The script refuses any other block count.

Tokens: a plain text file read as ddx's byte tokenizer does (UTF-8 BOM dropped, a newline
appended unless the text ends with one), or a ddx token cache (*.ddxtok, see docs/data.md).

Loss: sum of token cross-entropies over the global batch / global token count. Each rank
backpropagates its local sum times 1/global tokens and FSDP2's reduce-scatter SUMS gradients
(gradient divide factor 1), exactly as ddx does: no division by the world size.

Optimizer: torch.optim.AdamW (single-tensor path, weight decay as given, betas 0.9/0.999,
eps 1e-8) with ddx's schedule (trainers/optim/lr_schedule.cpp) set before every step.

Processes: under `ddx launch` / torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the
environment) each process is one rank; otherwise the script spawns --nproc ranks itself.

  fsdp2_reference.py --data data.txt --init init.safetensors --seq-length 32 --batch-size 4 \
      --steps 20 --lr 3e-3 --out losses.json [--nproc 2] [--final-weights final.safetensors] [--dtype fp64]

--init: safetensors with ddx parameter names (`ddx train --final-weights`, e.g. after one step
at --lr 0) or Hugging Face GPT-2 names (`--init-from` files). Output JSON: {"losses": [...],
"grad_norms": [...], "lrs": [...], "step_ms": [...], "world_size": N, "tokens_per_step": n}.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_training as rt  # noqa: E402


def train(rank, world, args):
    from torch.distributed.fsdp import fully_shard

    cfg, model = rt.build_model(args)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    model.tie()  # fully_shard replaced the root's parameters by DTensors
    for m in model.modules():
        if hasattr(m, "set_gradient_divide_factor"):
            # A plain SUM reduce-scatter: the loss is already divided by the global token count.
            # (A divide factor alone becomes PREMUL_SUM, which Gloo lacks; forced SUM then divides by 1.)
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)

    optimizer = rt.adamw(model, args)
    blocks = rt.global_blocks(rt.read_tokens(args.data), args.seq_length, world * args.batch_size)
    mine = blocks[rank * args.batch_size:(rank + 1) * args.batch_size]
    inputs, labels = mine[:, :-1].contiguous().to(args.device), mine[:, 1:].contiguous().to(args.device)
    args.global_tokens = world * labels.numel()

    def step_loss():
        logits = model(inputs)
        loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum")
        (loss_sum * (1.0 / args.global_tokens)).backward()
        # Global gradient norm: local shards' squares summed over ranks.
        sq = torch.zeros((), dtype=torch.float64, device=args.device)
        for p in model.parameters():
            if p.grad is not None:
                sq += rt.local_tensor(p.grad).double().pow(2).sum()
        stats = torch.stack([loss_sum.detach().double(), sq])
        dist.all_reduce(stats)
        return stats[0].item(), stats[1].item()

    rt.write_results(model, args, rt.train_steps(model, optimizer, args, step_loss))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rt.add_common_args(p)
    p.add_argument("--batch-size", type=int, required=True, help="sequences per rank (ddx's -b)")
    rt.launch(train, p.parse_args())


if __name__ == "__main__":
    main()
