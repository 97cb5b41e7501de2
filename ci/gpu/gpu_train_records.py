#!/usr/bin/env python3
"""The GPU check's training records (ci/gpu_check.sh step 7) from train_throughput.py --json:
ddx's tokens/s against PyTorch eager (at least 1.0x), against torch.compile (reported), MFU on
both sides (the same model and batch do the same FLOPs per token, so eager's MFU is ddx's
scaled by the tokens/s ratio), and the peak GPU memory of each side.

  gpu_train_records.py TRAIN_JSON OUT CHECK
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402


def rec(out, name, status, detail, ddx=None, reference=None, unit="", min_ratio=None):
    results.record(argparse.Namespace(out=out, name=name, status=status, detail=detail, ddx=ddx, reference=reference,
                                      unit=unit, min_ratio=min_ratio))


def main():
    path, out, check = sys.argv[1:4]
    with open(path) as f:
        t = json.load(f)
    mfu = t.get("ddx_mfu")
    eager_mfu = mfu * t["eager_tokens_per_s"] / t["ddx_tokens_per_s"] if mfu else None
    mfu_text = f"MFU ddx {mfu:.3f}, eager {eager_mfu:.3f}" if mfu else "MFU not known for this GPU"
    rec(out, f"{check}: tokens/s vs PyTorch eager", "PASS",
        f"{t['model']} b{t['batch']}x{t['seq']} {t['dtype']}; {mfu_text}",
        t["ddx_tokens_per_s"], t["eager_tokens_per_s"], "tokens/s", 1.0)
    if t.get("compiled_tokens_per_s"):
        rec(out, f"{check}: tokens/s vs torch.compile", "INFO", "reported, not judged",
            t["ddx_tokens_per_s"], t["compiled_tokens_per_s"], "tokens/s")
    if t.get("ddx_peak_gpu_bytes") and t.get("eager_peak_gpu_bytes"):
        rec(out, f"{check}: peak GPU memory vs PyTorch eager", "INFO", "caching allocator's peak allocated bytes",
            t["ddx_peak_gpu_bytes"] / 2**20, t["eager_peak_gpu_bytes"] / 2**20, "MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
