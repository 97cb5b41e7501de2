#!/usr/bin/env python3
"""Tokens/s of `ddx train` (single strategy) against an equivalent PyTorch eager training loop
on the same model shape, batch and machine, measured in the same run. Prints the ratio
(ddx / PyTorch; > 1 means ddx is faster).

  .venv/bin/python benchmarks/train_throughput.py --ddx build/bin/ddx [--model gpt2] [--batch 2] [--seq 128]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from gpt2_module import GPT2, train_step  # noqa: E402

# HF-style configs of ddx's GPT-2 presets (docs/models.md).
PRESETS = {
    "gpt2": {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024},
    "gpt2-medium": {"vocab_size": 50257, "n_embd": 1024, "n_layer": 24, "n_head": 16, "n_positions": 1024},
    "debug": {"vocab_size": 259, "n_embd": 35, "n_layer": 3, "n_head": 5, "n_positions": 131, "n_inner": 137},
}


def ddx_tokens_per_s(args, workdir):
    metrics = os.path.join(workdir, "ddx.jsonl")
    cmd = [args.ddx, "train", "-m", args.model, "-b", str(args.batch), "-s", str(args.seq),
           "--max-steps", str(args.steps), "--log-freq", "1", "--no-progress", "--lr", "1e-4",
           "--metrics-file", metrics, "--save-dir", workdir]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    return [r["tokens_per_s"] for r in records[args.warmup:]]


def pytorch_tokens_per_s(args):
    torch.manual_seed(0)
    model = GPT2(PRESETS[args.model])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    vocab = PRESETS[args.model]["vocab_size"]
    rates = []
    for step in range(args.steps):
        tokens = torch.randint(0, vocab, (args.batch, args.seq + 1))
        t0 = time.perf_counter()
        train_step(model, optimizer, tokens[:, :-1], tokens[:, 1:])
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            rates.append(args.batch * args.seq / dt)
    return rates


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--model", default="gpt2", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        ddx = ddx_tokens_per_s(args, workdir)
    ref = pytorch_tokens_per_s(args)
    d, r = statistics.median(ddx), statistics.median(ref)
    print(f"model {args.model}, batch {args.batch} x {args.seq} tokens, {args.steps - args.warmup} timed steps, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'':24s} {'median tokens/s':>16s}")
    print(f"{'ddx train (C++)':24s} {d:16.1f}")
    print(f"{'PyTorch eager (Python)':24s} {r:16.1f}")
    print(f"ratio ddx / PyTorch: {d / r:.3f}")


if __name__ == "__main__":
    main()
