"""Both sides of a ddx-against-PyTorch throughput benchmark, measured the same way: `ddx train`
(medians from its metrics file) and ranks of a PyTorch model spawned here (median step time)."""
import contextlib
import os
import socket
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ddx_metrics import median_step_metrics
from gpt2_module import median_step_seconds


def ddx_medians(args, workdir, ranks, extra, name="ddx"):
    """`ddx train` of args.model on args.batch x args.seq for args.steps steps (lr 1e-4,
    OMP_NUM_THREADS=1), under `ddx launch` when ranks > 1, with `extra` flags; (tokens/s,
    step ms, comm-wait ms) medians after args.warmup steps. Exits with ddx's output on failure."""
    metrics = os.path.join(workdir, name + ".jsonl")
    train = [args.ddx, "train", "-m", args.model, "-b", str(args.batch), "-s", str(args.seq),
             "--max-steps", str(args.steps), "--log-freq", "1", "--no-progress", "--lr", "1e-4",
             "--metrics-file", metrics, "--save-dir", os.path.join(workdir, name)] + extra
    cmd = [args.ddx, "launch", "--nproc-per-node", str(ranks), "--"] + train if ranks > 1 else train
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    if done.returncode != 0:
        sys.exit(f"ddx failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return median_step_metrics(metrics, args.warmup)


def _worker(rank, world, port, build, vocab, loss_context, args, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)  # the same model and random batches on every rank
    model, optimizer = build(rank, world, args)
    seconds = median_step_seconds(model, optimizer, vocab, args, dist.barrier, loss_context)
    if rank == 0:
        out.put(seconds)
    dist.barrier()  # no rank tears Gloo down while another still has traffic in flight
    dist.destroy_process_group()


def pytorch_step_ms(build, args, ranks, vocab, loss_context=contextlib.nullcontext):
    """Median step milliseconds (rank 0's) of `ranks` spawned Gloo ranks, one thread each,
    training build(rank, world, args) -> (model, optimizer) with gpt2_module.train_step; the
    loss and backward run inside loss_context(). build and loss_context must be module-level
    (the ranks are spawned)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_worker, args=(ranks, port, build, vocab, loss_context, args, out), nprocs=ranks,
                       join=True, start_method="spawn")
    return out.get() * 1e3
