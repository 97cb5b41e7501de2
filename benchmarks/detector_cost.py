#!/usr/bin/env python3
"""Cost of the silent-failure detectors (docs/faults.md) on a DDP run: tokens/s of the same
`ddx train --strategy ddp` run with `--nan-check --replica-check-freq 10` divided by without,
repeated with the two runs interleaved (checked, plain, checked, plain, ...) so that a machine
whose load changes over time shifts both sides alike. Prints each pair's ratio and the median
ratio (target >= 0.98), with the spread of the plain runs as the noise floor.

  .venv/bin/python benchmarks/detector_cost.py --ddx build/bin/ddx [--model debug] [--reps 5]
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from ddx_metrics import run_tokens_per_s  # noqa: E402
from race import ddx_medians  # noqa: E402

DETECTORS = ["--nan-check", "--replica-check-freq", "10"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--model", default="debug")
    p.add_argument("--batch", type=int, default=8, help="sequences per rank")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=42, help="a multiple of 10 after the warmup: every run checks alike")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    plain, checked, ratios = [], [], []
    with tempfile.TemporaryDirectory() as workdir:
        for rep in range(args.reps):
            for name, extra, out in (("checked", DETECTORS, checked), ("plain", [], plain)):
                tag = f"{name}{rep}"
                ddx_medians(args, workdir, args.ranks, ["--strategy", "ddp"] + extra, tag)
                out.append(run_tokens_per_s(os.path.join(workdir, tag + ".jsonl"), args.warmup))
            ratios.append(checked[-1] / plain[-1])
            print(f"rep {rep}: plain {plain[-1]:9.1f} tokens/s, checked {checked[-1]:9.1f} tokens/s, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
    spread = (max(plain) - min(plain)) / statistics.median(plain)
    print(f"model {args.model}, ddp on {args.ranks} ranks x {args.batch} x {args.seq} tokens, Gloo, OMP_NUM_THREADS=1, "
          f"{args.steps - args.warmup} timed steps per run, {args.reps} interleaved pairs")
    print(f"median ratio checked / plain tokens/s: {statistics.median(ratios):.3f} "
          f"(pairs {min(ratios):.3f} .. {max(ratios):.3f}; plain runs alone spread {spread:.1%})")


if __name__ == "__main__":
    main()
