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


def ddx_run(args, workdir):
    metrics = os.path.join(workdir, "ddx.jsonl")
    train = [args.ddx, "train", "-m", args.model, "-b", str(args.batch), "-s", str(args.seq),
             "--max-steps", str(args.steps), "--log-freq", "1", "--no-progress", "--lr", "1e-4",
             "--metrics-file", metrics, "--save-dir", workdir, "--strategy", args.ddx_strategy]
    if args.no_reshard_after_forward and args.ddx_strategy == "fsdp":
        train.append("--no-reshard-after-forward")
    train += args.ddx_flags.split()
    cmd = [args.ddx, "launch", "--nproc-per-node", str(args.ranks), "--"] + train
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    if done.returncode != 0:
        sys.exit(f"ddx failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return median_step_metrics(metrics, args.warmup)


def pytorch_worker(rank, world, port, args, out):
    from torch.distributed.fsdp import fully_shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = GPT2(PRESETS[args.model])
    reshard = not args.no_reshard_after_forward
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    for m in model.modules():
        if hasattr(m, "set_force_sum_reduction_for_comms"):
            m.set_gradient_divide_factor(1.0)  # ddx sums gradients (the loss holds the 1/tokens)
            m.set_force_sum_reduction_for_comms(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    seconds = median_step_seconds(model, optimizer, PRESETS[args.model]["vocab_size"], args, dist.barrier)
    if rank == 0:
        out.put(seconds)
    dist.destroy_process_group()


def pytorch_fsdp2(args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.start_processes(pytorch_worker, args=(args.ranks, port, args, out), nprocs=args.ranks, join=True,
                       start_method="spawn")
    step_s = out.get()
    return args.ranks * args.batch * args.seq / step_s, step_s * 1e3


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
    with tempfile.TemporaryDirectory() as workdir:
        ddx_tps, ddx_ms, ddx_wait = ddx_run(args, workdir)
    torch_tps, torch_ms = pytorch_fsdp2(args)
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
