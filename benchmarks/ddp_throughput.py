#!/usr/bin/env python3
"""ddx DDP against PyTorch's Python DistributedDataParallel on the same model, per-rank batch
and backend (Gloo, 2 ranks), in the same run; and ddx DDP's step time against a single-process
step on the same per-rank batch (the scaling overhead). Prints both ratios.

  .venv/bin/python benchmarks/ddp_throughput.py --ddx build/bin/ddx [--model gpt2] [--batch 2] [--seq 128]
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


def pytorch_ddp(rank, world, args):
    model = torch.nn.parallel.DistributedDataParallel(GPT2(PRESETS[args.model]))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--model", default="gpt2", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=2, help="sequences per rank")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--ranks", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        ddx_tps, ddx_ms, ddx_wait = ddx_medians(args, workdir, args.ranks, ["--strategy", "ddp"], "ddp")
        single_tps, single_ms, _ = ddx_medians(args, workdir, 1, [], "single")
    torch_ms = pytorch_step_ms(pytorch_ddp, args, args.ranks, PRESETS[args.model]["vocab_size"])
    torch_tps = args.ranks * args.batch * args.seq / torch_ms * 1e3
    print(f"model {args.model}, {args.ranks} ranks x {args.batch} x {args.seq} tokens, Gloo, OMP_NUM_THREADS=1, "
          f"{args.steps - args.warmup} timed steps (medians)")
    print(f"{'':28s} {'tokens/s':>10s} {'step ms':>10s}")
    print(f"{'ddx ddp':28s} {ddx_tps:10.1f} {ddx_ms:10.1f}   (comm wait {ddx_wait:.1f} ms)")
    print(f"{'PyTorch DDP (Python)':28s} {torch_tps:10.1f} {torch_ms:10.1f}")
    print(f"{'ddx single, same per-rank batch':28s} {single_tps:10.1f} {single_ms:10.1f}")
    print(f"ratio ddx DDP / PyTorch DDP tokens/s: {ddx_tps / torch_tps:.3f}")
    print(f"ratio ddx DDP step / single step (scaling overhead): {ddx_ms / single_ms:.3f}")


if __name__ == "__main__":
    main()
