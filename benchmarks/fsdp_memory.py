#!/usr/bin/env python3
"""Per-rank model-state memory of ddx FSDP against ddx DDP at 1, 2 and 4 ranks, as the trainer
accounts it in its metrics (param_bytes, grad_bytes, optimizer_bytes, unsharded_peak_bytes of
rank 0), for a GPT-2 with many small blocks, so that one block is small against the whole.
Prints a table and, per world size, the ratio FSDP/DDP next to the ideal.

  .venv/bin/python benchmarks/fsdp_memory.py --ddx build/bin/ddx [--layers 24] [--hidden 64] [--ranks 1,2,4]

The ideal: sharded state is 1/N of the replicated one; while a unit runs, its full parameters
(and, in backward, its full gradients) exist on every rank as well. So with S = DDP's
param + grad + optimizer bytes and U = the largest unit's fp32 parameter bytes (one block here):
    ideal FSDP state / DDP state            = 1/N
    ideal (state + unsharded peak) / DDP    = 1/N + 2U/S   (one unit's parameters and gradients)
Dim-0 padding (a tensor's rows not divisible by N) makes shards slightly larger than 1/N.

DDP runs with --grad-as-bucket-view, so its gradients are one copy (the textbook replicated
state: 4 bytes of parameter, 4 of gradient and 8 of AdamW state per parameter); --ddp-flags ''
measures plain DDP, whose buckets hold a second copy of the gradients. Pass flags with '=' when
they start with a dash: --fsdp-flags=--no-reshard-after-forward, --fsdp-flags='--prefetch 2'.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def block_parameters(d, inner):
    # ln_1, ln_2 (2d each), c_attn (3d x d + 3d), attn c_proj (d x d + d), c_fc (inner x d + inner), mlp c_proj (d x inner + d)
    return 4 * d + 3 * d * d + 3 * d + d * d + d + inner * d + inner + d * inner + d


def measure(args, workdir, config, strategy, ranks, extra):
    metrics = os.path.join(workdir, f"{strategy}-{ranks}.jsonl")
    cmd = [args.ddx, "launch", "--nproc-per-node", str(ranks), "--",
           args.ddx, "train", "--strategy", strategy, "-m", config, "-b", "1", "-s", str(args.seq),
           "--max-steps", "2", "--log-freq", "1", "--no-progress", "--lr", "1e-4",
           "--metrics-file", metrics, "--save-dir", workdir] + extra
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          text=True)
    if done.returncode != 0:
        sys.exit(f"ddx train --strategy {strategy} at {ranks} ranks failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    with open(metrics) as f:
        last = [json.loads(line) for line in f][-1]
    return {k: int(last.get(k) or 0) for k in ("param_bytes", "grad_bytes", "optimizer_bytes", "unsharded_peak_bytes")}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=259)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--fsdp-flags", default="", help="more flags for the FSDP runs, e.g. --fsdp-flags='--prefetch 2'")
    p.add_argument("--ddp-flags", default="--grad-as-bucket-view", help="flags for the DDP runs")
    args = p.parse_args()
    world_sizes = [int(n) for n in args.ranks.split(",")]
    d, inner = args.hidden, 4 * args.hidden
    cfg = {"model_type": "gpt2", "vocab_size": args.vocab, "n_embd": d, "n_layer": args.layers, "n_head": args.heads,
           "n_positions": max(64, args.seq), "n_inner": inner}
    block = block_parameters(d, inner)
    embed = args.vocab * d + cfg["n_positions"] * d
    total = embed + args.layers * block + 2 * d
    unit_bytes = 4 * max(block, embed)

    rows = {}
    with tempfile.TemporaryDirectory() as workdir:
        config = os.path.join(workdir, "config.json")
        with open(config, "w") as f:
            json.dump(cfg, f)
        for n in world_sizes:
            rows[("ddp", n)] = measure(args, workdir, config, "ddp", n, args.ddp_flags.split())
            rows[("fsdp", n)] = measure(args, workdir, config, "fsdp", n, args.fsdp_flags.split())

    mib = 1024.0 * 1024.0
    print(f"GPT-2, {args.layers} layers, hidden {d}, MLP {inner}, vocab {args.vocab}: {total:,} parameters; "
          f"one block {block:,} ({100.0 * block / total:.1f}% of the model); DDP flags '{args.ddp_flags}'")
    print("per-rank model state of rank 0 (MiB), from the trainer's metrics")
    print(f"{'ranks':>5s} {'strategy':>8s} {'params':>9s} {'grads':>9s} {'optim':>9s} {'state':>9s} "
          f"{'unsh.peak':>9s} {'peak/unit':>9s} {'state+peak':>10s}")
    for n in world_sizes:
        for s in ("ddp", "fsdp"):
            r = rows[(s, n)]
            state = r["param_bytes"] + r["grad_bytes"] + r["optimizer_bytes"]
            peak = r["unsharded_peak_bytes"]
            print(f"{n:5d} {s:>8s} {r['param_bytes'] / mib:9.3f} {r['grad_bytes'] / mib:9.3f} "
                  f"{r['optimizer_bytes'] / mib:9.3f} {state / mib:9.3f} {peak / mib:9.3f} {peak / unit_bytes:9.2f} "
                  f"{(state + peak) / mib:10.3f}")
    print()
    print("FSDP / DDP per world size (unit = one block's fp32 parameters)")
    print(f"{'ranks':>5s} {'state':>8s} {'ideal 1/N':>10s} {'state+peak':>11s} {'ideal 1/N+2U/S':>15s}")
    for n in world_sizes:
        ddp, fsdp = rows[("ddp", n)], rows[("fsdp", n)]
        s_ddp = ddp["param_bytes"] + ddp["grad_bytes"] + ddp["optimizer_bytes"] + ddp["unsharded_peak_bytes"]
        s_fsdp = fsdp["param_bytes"] + fsdp["grad_bytes"] + fsdp["optimizer_bytes"]
        print(f"{n:5d} {s_fsdp / s_ddp:8.3f} {1.0 / n:10.3f} {(s_fsdp + fsdp['unsharded_peak_bytes']) / s_ddp:11.3f} "
              f"{1.0 / n + 2.0 * unit_bytes / s_ddp:15.3f}")


if __name__ == "__main__":
    main()
