#!/usr/bin/env python3
"""PyTorch's own figures for what `ddx probe compute` and `ddx probe memory` measure, taken the
same way on the same GPU in the same run (ci/gpu_check.sh), and the ratio of ddx's to them.

The kernels are the probes' (probes/node/compute_probe.cpp, memory_probe.cpp): torch.mm on
n x n operands (2 n^3 FLOPs; tf32 is fp32 with matmul precision "high"), STREAM copy (2 arrays
moved) and triad a = b + 3c (3 arrays) on float64 arrays, and pinned host<->device copies. A
trial repeats its kernel for at least --min-trial-time seconds between two synchronisations; a
figure is the best of --trials trials (STREAM's rule, as the probes use).

  torch_reference.py compute --dtypes bf16,fp16,tf32,fp32 --sizes 8192 --json ref.json
  torch_reference.py memory --array-bytes 64M --json ref.json
  torch_reference.py compare DDX_JSON REF_JSON OUT --check NAME --min-ratio 0.95
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp32": "float32"}


def best_figure(run, work, scale, trials, min_time):
    import torch
    best = 0.0
    run()
    torch.cuda.synchronize()
    for _ in range(trials):
        reps, start = 0, time.perf_counter()
        while True:
            run()
            reps += 1
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = max(best, work * reps / elapsed / scale)
    return best


def compute(args):
    import torch
    figures = {}
    for dtype in args.dtypes.split(","):
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
        for n in [int(x) for x in args.sizes.split(",")]:
            t = getattr(torch, DTYPES[dtype])
            a, b = torch.rand(n, n, device="cuda", dtype=t), torch.rand(n, n, device="cuda", dtype=t)
            c = torch.empty(n, n, device="cuda", dtype=t)
            figures[f"{dtype}_n{n}"] = best_figure(lambda: torch.mm(a, b, out=c), 2.0 * n ** 3, 1e12,
                                                   args.trials, args.min_trial_time)
            del a, b, c
    return figures


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def memory(args):
    import torch
    n = parse_bytes(args.array_bytes) // 8
    a, b, c = (torch.rand(n, device="cuda", dtype=torch.float64) for _ in range(3))
    pinned = torch.rand(n, dtype=torch.float64).pin_memory()
    nbytes = a.numel() * 8
    return {
        "device_copy": best_figure(lambda: b.copy_(a), 2.0 * nbytes, 1e9, args.trials, args.min_trial_time),
        "device_triad": best_figure(lambda: torch.add(b, c, alpha=3.0, out=a), 3.0 * nbytes, 1e9, args.trials,
                                    args.min_trial_time),
        "host_to_device": best_figure(lambda: a.copy_(pinned, non_blocking=True), float(nbytes), 1e9, args.trials,
                                      args.min_trial_time),
        "device_to_host": best_figure(lambda: pinned.copy_(a, non_blocking=True), float(nbytes), 1e9, args.trials,
                                      args.min_trial_time),
    }


def compare(args):
    """One record per metric: ddx rank 0's best against the reference's figure."""
    with open(args.ddx_json) as f:
        ddx = json.load(f)
    with open(args.ref_json) as f:
        ref = json.load(f)
    units = {m["key"]: m["unit"] for m in ddx.get("metrics", [])}
    mine = ddx["ranks"][0]["metrics"]
    missing = sorted(set(ref) - set(mine))
    failed = 0
    for key in sorted(ref):
        if key in missing:
            continue
        rec = argparse.Namespace(out=args.out, name=f"{args.check} {key}", status="PASS",
                                 detail=f"ddx best of trials vs PyTorch's same kernel, same run",
                                 ddx=mine[key]["best"], reference=ref[key], unit=units.get(key, ""),
                                 min_ratio=args.min_ratio)
        results.record(rec)
    for key in missing:
        results.record(argparse.Namespace(out=args.out, name=f"{args.check} {key}", status="FAIL",
                                          detail="ddx's JSON has no figure for this metric", ddx=None, reference=None,
                                          unit="", min_ratio=None))
        failed += 1
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    for name in ("compute", "memory"):
        s = sub.add_parser(name)
        s.add_argument("--json", required=True)
        s.add_argument("--trials", type=int, default=7)
        s.add_argument("--min-trial-time", type=float, default=0.05)
        if name == "compute":
            s.add_argument("--dtypes", default="bf16,fp16,tf32,fp32")
            s.add_argument("--sizes", default="8192")
        else:
            s.add_argument("--array-bytes", default="64M")
    c = sub.add_parser("compare")
    c.add_argument("ddx_json")
    c.add_argument("ref_json")
    c.add_argument("out")
    c.add_argument("--check", required=True)
    c.add_argument("--min-ratio", type=float, required=True)
    args = p.parse_args()
    if args.what == "compare":
        return compare(args)
    figures = compute(args) if args.what == "compute" else memory(args)
    with open(args.json, "w") as f:
        json.dump(figures, f, indent=2)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
