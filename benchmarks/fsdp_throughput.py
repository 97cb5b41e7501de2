#!/usr/bin/env python3
"""ddx FSDP (`ddx train --strategy fsdp`) against PyTorch's Python FSDP2 (fully_shard on every
block, then on the root) on the same model, per-rank batch, sequence length and backend (Gloo,
2 ranks, CPU), in the same run. Prints tokens/s and step time of both and the ratio ddx/PyTorch
(> 1: ddx is faster).

  .venv/bin/python benchmarks/fsdp_throughput.py --ddx build/bin/ddx [--model gpt2] [--batch 1] [--seq 128]

Both sides reshard after forward by default, as FSDP2 does; --no-reshard-after-forward turns it
off on both. PyTorch's gradients are reduce-scattered as a plain SUM (Gloo has no AVG or
PREMUL_SUM), as ddx's are. --ddx-strategy ddp runs the ddx side with DDP instead (a baseline);
--ddx-flags='--prefetch 2' passes more flags to ddx train (write it with '=').
"""
import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from gpt2_module import GPT2  # noqa: E402
from race import ddx_medians, pytorch_step_ms  # noqa: E402
from train_throughput import PRESETS  # noqa: E402


def pytorch_fsdp2(rank, world, args):
    from torch.distributed.fsdp import fully_shard

    model = GPT2(PRESETS[args.model])
    reshard = not args.no_reshard_after_forward
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    for m in model.modules():
        if hasattr(m, "set_force_sum_reduction_for_comms"):
            m.set_gradient_divide_factor(1.0)  # ddx sums gradients (the loss holds the 1/tokens)
            m.set_force_sum_reduction_for_comms(True)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--model", default="gpt2", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=1, help="sequences per rank")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--no-reshard-after-forward", action="store_true", help="on both sides")
    p.add_argument("--ddx-strategy", default="fsdp", help="fsdp (default), or ddp as a baseline")
    p.add_argument("--ddx-flags", default="", help="more ddx train flags, e.g. --ddx-flags='--prefetch 2'")
    args = p.parse_args()
    if args.steps <= args.warmup:
        p.error("--steps must exceed --warmup")
    extra = ["--strategy", args.ddx_strategy] + args.ddx_flags.split()
    if args.no_reshard_after_forward and args.ddx_strategy == "fsdp":
        extra.append("--no-reshard-after-forward")
    with tempfile.TemporaryDirectory() as workdir:
        ddx_tps, ddx_ms, ddx_wait = ddx_medians(args, workdir, args.ranks, extra)
    torch_ms = pytorch_step_ms(pytorch_fsdp2, args, args.ranks, PRESETS[args.model]["vocab_size"])
    torch_tps = args.ranks * args.batch * args.seq / torch_ms * 1e3
    label = f"ddx {args.ddx_strategy}" + (f" {args.ddx_flags}" if args.ddx_flags else "")
    print(f"model {args.model}, {args.ranks} ranks x {args.batch} x {args.seq} tokens, Gloo, OMP_NUM_THREADS=1, "
          f"reshard after forward: {'no' if args.no_reshard_after_forward else 'yes'}, "
          f"{args.steps - args.warmup} timed steps (medians), torch {torch.__version__}")
    print(f"{'':28s} {'tokens/s':>10s} {'step ms':>10s}")
    print(f"{label:28s} {ddx_tps:10.1f} {ddx_ms:10.1f}   (comm wait {ddx_wait:.1f} ms)")
    print(f"{'PyTorch FSDP2 (Python)':28s} {torch_tps:10.1f} {torch_ms:10.1f}")
    print(f"ratio {label} / PyTorch FSDP2 tokens/s: {ddx_tps / torch_tps:.3f}")


if __name__ == "__main__":
    main()
