#!/usr/bin/env python3
"""ddx DDP against PyTorch's Python DistributedDataParallel on the same model, per-rank batch
and backend (Gloo, 2 ranks), in the same run; and ddx DDP's step time against a single-process
step on the same per-rank batch (the scaling overhead). Prints both ratios.

  .venv/bin/python benchmarks/ddp_throughput.py --ddx build/bin/ddx [--model gpt2] [--batch 2] [--seq 128]
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from gpt2_module import GPT2, median_step_seconds  # noqa: E402
from ddx_metrics import median_step_metrics  # noqa: E402
from train_throughput import PRESETS  # noqa: E402


def ddx_run(args, workdir, ranks, name):
    metrics = os.path.join(workdir, name + ".jsonl")
    train = [args.ddx, "train", "-m", args.model, "-b", str(args.batch), "-s", str(args.seq),
             "--max-steps", str(args.steps), "--log-freq", "1", "--no-progress", "--lr", "1e-4",
             "--metrics-file", metrics, "--save-dir", workdir]
    if ranks > 1:
        cmd = [args.ddx, "launch", "--nproc-per-node", str(ranks), "--"] + train + ["--strategy", "ddp"]
    else:
        cmd = train
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return median_step_metrics(metrics, args.warmup)


def pytorch_worker(rank, world, port, args, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(GPT2(PRESETS[args.model]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    seconds = median_step_seconds(model, optimizer, PRESETS[args.model]["vocab_size"], args, dist.barrier)
    if rank == 0:
        out.put(seconds)
    dist.destroy_process_group()


def pytorch_ddp(args, ranks):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.start_processes(pytorch_worker, args=(ranks, port, args, out), nprocs=ranks, join=True, start_method="spawn")
    step_s = out.get()
    return ranks * args.batch * args.seq / step_s, step_s * 1e3


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
        ddx_tps, ddx_ms, ddx_wait = ddx_run(args, workdir, args.ranks, "ddp")
        single_tps, single_ms, _ = ddx_run(args, workdir, 1, "single")
    torch_tps, torch_ms = pytorch_ddp(args, args.ranks)
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
