#!/usr/bin/env python3
"""PyTorch tensor-parallel reference run for `ddx train --strategy tp` (tp_reference_test).

Trains ddx's GPT-2 with PyTorch's own tensor parallelism (torch.distributed.tensor.parallel:
parallelize_module with ColwiseParallel / RowwiseParallel, SequenceParallel with
--sequence-parallel, and loss_parallel for the cross-entropy; Gloo on 127.0.0.1, CPU, every
rank one tensor-parallel rank) from the same initial weights, on the same tokens, with the same
loss normalisation, optimizer and learning-rate schedule as `ddx train`, and writes the per-step
losses and gradient norms as JSON (the record of fsdp2_reference.py).

The model, data, schedule, optimizer and processes are reference_training.py's; the math comes
from reference_models.py, written independently of the C++ code.

The plan is Megatron's (docs/tp.md, ../shared/reference/parallelism.md):
  - wte: RowwiseParallel on an Embedding = vocab rows split, out-of-range ids masked, all-reduce;
  - q, k, v (GPT-2's c_attn, split in three) and mlp.c_fc: ColwiseParallel. A column split of
    each of q, k, v gives every rank whole heads (n_head / tp of them), as ddx's per-head split
    of the fused c_attn does; ColwiseParallel on the fused [3d, d] weight would not;
  - attn.c_proj and mlp.c_proj: RowwiseParallel (all-reduce after; reduce-scatter with SP);
  - lm_head (tied to wte when the model ties them): ColwiseParallel with its output left
    vocab-sharded, and loss_parallel(): the cross-entropy never gathers full logits;
  - --sequence-parallel: ln_1, ln_2, ln_f run on a sequence shard (SequenceParallel, whose
    weights' gradients are summed over the group), the attention and MLP inputs are
    all-gathered (PrepareModuleInput), the embedding output is split along the sequence
    (PrepareModuleOutput), and the row-parallel outputs are reduce-scattered.
  Position embeddings stay replicated (unsharded parameters, identical on every rank).
  Vocabularies and MLP widths that tp does not divide are sharded unevenly (torch.chunk sizes).

Batch: every rank trains on the whole batch (no data parallelism): --batch-size sequences, and
the data must hold exactly that many blocks (see reference_training.global_blocks).

Gradient norm: each parameter counted once, sharded ones from the sum of their shards' squares
over the group, replicated ones (plain tensors, Replicate DTensors) from one copy.

  tp_reference.py --data data.txt --init init.safetensors --model config.json --seq-length 32 \
      --batch-size 8 --steps 20 --lr 3e-3 --out losses.json [--nproc 2] [--sequence-parallel] [--dtype fp64]

--nproc 1 runs the same script without any parallel plan: PyTorch's single-device numbers.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_training as rt  # noqa: E402


def parallel_plan(num_layers, sequence_parallel):
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, PrepareModuleOutput,
                                                   RowwiseParallel, SequenceParallel)

    # Activations between blocks: replicated, or sharded along the sequence (dim 1) with SP.
    between = Shard(1) if sequence_parallel else Replicate()
    plan = {"embed.wte": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
            "lm_head": ColwiseParallel(input_layouts=between, output_layouts=Shard(-1), use_local_output=False)}
    if sequence_parallel:
        plan["embed"] = PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1))
        plan["ln_f"] = SequenceParallel()
    for i in range(num_layers):
        b = f"blocks.{i}."
        plan.update({b + "attn.q": ColwiseParallel(), b + "attn.k": ColwiseParallel(), b + "attn.v": ColwiseParallel(),
                     b + "attn.c_proj": RowwiseParallel(output_layouts=between),
                     # A DTensor between c_fc and c_proj: an MLP width that tp does not divide
                     # leaves uneven shards, which a local tensor cannot describe to c_proj.
                     b + "mlp.c_fc": ColwiseParallel(use_local_output=False),
                     b + "mlp.c_proj": RowwiseParallel(output_layouts=between)})
        if sequence_parallel:
            gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
            plan.update({b + "ln_1": SequenceParallel(), b + "ln_2": SequenceParallel(),
                         b + "attn": gather, b + "mlp": gather})
    return plan


def is_sharded(p):
    return hasattr(p, "placements") and any(pl.is_shard() for pl in p.placements)


def train(rank, world, args):
    cfg, model = rt.build_model(args)
    heads = cfg["n_head"]
    if heads % world:
        raise SystemExit(f"tensor parallel size {world} does not divide the {heads} attention heads")
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
        parallelize_module(model, mesh, parallel_plan(cfg["n_layer"], args.sequence_parallel))
        model.tie()  # the plan replaced wte's and lm_head's weights by separate DTensors
    elif args.sequence_parallel:
        raise SystemExit("--sequence-parallel needs more than one rank")

    optimizer = rt.adamw(model, args)
    blocks = rt.global_blocks(rt.read_tokens(args.data), args.seq_length, args.batch_size)
    inputs, labels = blocks[:, :-1].contiguous(), blocks[:, 1:].contiguous()
    args.global_tokens = labels.numel()

    def step_loss():
        from torch.distributed.tensor.parallel import loss_parallel

        logits = model(inputs)
        with loss_parallel():
            loss_sum = F.cross_entropy(logits.flatten(0, 1), labels.reshape(-1), reduction="sum")
            (loss_sum * (1.0 / args.global_tokens)).backward()
        sharded = torch.zeros((), dtype=torch.float64)
        replicated = torch.zeros((), dtype=torch.float64)
        for p in model.parameters():
            if p.grad is not None and hasattr(p.grad, "placements") and p.grad.placements != p.placements:
                # SequenceParallel's norm weights get Partial gradients (each rank's sequence
                # shard): sum them over the group now, so the norm and clipping see the total.
                p.grad = p.grad.redistribute(p.device_mesh, p.placements)
            if p.grad is not None:
                sq = rt.local_tensor(p.grad).double().pow(2).sum()
                if is_sharded(p):
                    sharded += sq
                else:
                    replicated += sq
        dist.all_reduce(sharded)
        return rt.local_tensor(loss_sum).item(), (sharded + replicated).item()

    rt.write_results(model, args, rt.train_steps(model, optimizer, args, step_loss))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rt.add_common_args(p)
    p.add_argument("--batch-size", type=int, required=True, help="sequences per step, all ranks (ddx's -b)")
    p.add_argument("--sequence-parallel", action="store_true", help="norms on sequence shards (SequenceParallel)")
    rt.launch(train, p.parse_args())


if __name__ == "__main__":
    main()
