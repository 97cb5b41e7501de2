#!/usr/bin/env python3
"""ddx pipeline parallelism (`ddx train --strategy pp`) with GPipe and 1F1B against PyTorch's
own pipelining (torch.distributed.pipelining: PipelineStage with ScheduleGPipe and
Schedule1F1B) on the same model, split, micro-batches, batch, sequence length and backend (Gloo,
CPU, 2 ranks, one stage each), in the same run. Prints tokens/s of each (median over the timed
steps of a run, then median and spread over --rounds rounds; the four runs of a round go in a
rotated order, so a load that comes and goes on a shared machine falls on all of them), the
ratios 1F1B / GPipe and ddx / PyTorch, and ddx's peak in-flight micro-batches and boundary
activation bytes per stage (the executor's counts in the metrics, pp_peak_inflight_rank<r> and
pp_peak_activation_bytes_rank<r>).

  .venv/bin/python benchmarks/pp_throughput.py --ddx build/bin/ddx [--batch 8] [--seq 64] \
      [--microbatches 4] [--rounds 3]

The model is a GPT-2 of --layers blocks of width --width (byte vocabulary, tied embedding),
cut in the middle: stage 0 holds the embedding and the first half of the blocks, stage 1 the
rest, the final norm and the head (--pp-split on ddx's side, the same cut in PyTorch's stages,
tests/python/pp_reference.py's). PyTorch's loss is the summed token cross-entropy over the
global token count with its own gradient scaling off, and the tied embedding's two gradients are
summed over the pipeline, the work ddx does.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "python"))
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests", "python"))
from gpt2_module import GPT2  # noqa: E402
from race import ddx_medians  # noqa: E402
from pp_reference import FirstStage, LastStage  # noqa: E402


def config(args):
    return {"model_type": "gpt2", "vocab_size": 259, "n_embd": args.width, "n_layer": args.layers,
            "n_head": args.width // 64, "n_positions": max(args.seq, 64), "n_inner": 4 * args.width,
            "tie_word_embeddings": True}


def _torch_worker(rank, world, port, args, schedule_name, out):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = GPT2(config(args))
    model.tied = True
    cut = args.layers // 2
    module = FirstStage(model, cut) if rank == 0 else LastStage(model, cut)
    stage = PipelineStage(module, rank, world, torch.device("cpu"))
    tokens_per_step = args.batch * args.seq

    def loss_fn(logits, target):
        return F.cross_entropy(logits.flatten(0, 1), target.reshape(-1), reduction="sum") / tokens_per_step

    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule_name]
    schedule = kind(stage, n_microbatches=args.microbatches, loss_fn=loss_fn, scale_grads=False)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.0)
    tied = module.embed.wte.weight if rank == 0 else module.lm_head.weight
    times = []
    for step in range(args.steps):
        tokens = torch.randint(0, 259, (args.batch, args.seq + 1))
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            schedule.step(tokens[:, :-1].contiguous())
        else:
            schedule.step(target=tokens[:, 1:].contiguous())
        dist.all_reduce(tied.grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        dist.barrier()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    if rank == 0:
        out.put(statistics.median(times))
    dist.barrier()
    dist.destroy_process_group()


def torch_tokens_per_s(args, schedule_name):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_torch_worker, args=(2, port, args, schedule_name, out), nprocs=2, join=True,
                       start_method="spawn")
    return args.batch * args.seq / out.get()


def ddx_run(args, workdir, schedule_name, round_index):
    name = f"ddx-{schedule_name}-{round_index}"
    extra = ["--strategy", "pp", "--pp-schedule", schedule_name, "--microbatches", str(args.microbatches),
             "--pp-split", str(args.layers // 2)]
    tokens_per_s, _, _ = ddx_medians(args, workdir, 2, extra, name)
    with open(os.path.join(workdir, name + ".jsonl")) as f:
        last = [json.loads(line) for line in f][-1]
    memory = [(int(last[f"pp_peak_inflight_rank{r}"]), int(last[f"pp_peak_activation_bytes_rank{r}"]))
              for r in range(2)]
    return tokens_per_s, memory


def summary(values):
    """'median (min-max, spread %)' of a list of tokens/s."""
    m = statistics.median(values)
    return f"{m:9.1f}  ({min(values):.1f}-{max(values):.1f}, spread {100 * (max(values) - min(values)) / m:.0f}%)"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--width", type=int, default=256, help="hidden size (heads of 64)")
    p.add_argument("--layers", type=int, default=8, help="blocks; the cut is in the middle")
    p.add_argument("--batch", type=int, default=8, help="sequences per step")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.steps <= args.warmup:
        p.error("--steps must exceed --warmup")
    if args.batch % args.microbatches:
        p.error(f"--microbatches {args.microbatches} does not divide --batch {args.batch}")
    if args.width % 64 or args.layers < 2:
        p.error("--width must be a multiple of 64 and --layers at least 2")
    variants = ["ddx gpipe", "ddx 1f1b", "torch gpipe", "torch 1f1b"]
    rates = {v: [] for v in variants}
    memory = {}
    with tempfile.TemporaryDirectory() as workdir:
        args.model = os.path.join(workdir, "config.json")
        with open(args.model, "w") as f:
            json.dump(config(args), f)
        for r in range(args.rounds):
            for v in variants[r % len(variants):] + variants[:r % len(variants)]:
                side, schedule_name = v.split()
                if side == "ddx":
                    tps, memory[schedule_name] = ddx_run(args, workdir, schedule_name, r)
                else:
                    tps = torch_tokens_per_s(args, schedule_name)
                rates[v].append(tps)
                print(f"round {r + 1}: {v:12s} {tps:9.1f} tokens/s", flush=True)
    med = {v: statistics.median(rates[v]) for v in variants}
    print(f"\nGPT-2 {args.layers} x {args.width}, pp 2 (cut at block {args.layers // 2}), {args.batch} x {args.seq} "
          f"tokens per step in {args.microbatches} micro-batches, Gloo, OMP_NUM_THREADS=1, "
          f"{args.steps - args.warmup} timed steps per run, {args.rounds} rounds, torch {torch.__version__}")
    print(f"{'':14s} {'tokens/s: median (min-max over rounds)':>40s}")
    for v in variants:
        print(f"{v:14s} {summary(rates[v])}")
    print(f"ratio ddx 1f1b / ddx gpipe:     {med['ddx 1f1b'] / med['ddx gpipe']:.3f}")
    print(f"ratio ddx gpipe / torch gpipe:  {med['ddx gpipe'] / med['torch gpipe']:.3f}")
    print(f"ratio ddx 1f1b / torch 1f1b:    {med['ddx 1f1b'] / med['torch 1f1b']:.3f}")
    print(f"ratio torch 1f1b / torch gpipe: {med['torch 1f1b'] / med['torch gpipe']:.3f}")
    print("\nddx peak activations held between forward and backward, per stage (measured by the executor):")
    for schedule_name in ("gpipe", "1f1b"):
        cells = ", ".join(f"stage {r}: {n} micro-batches, {b / 1024:.0f} KiB" for r, (n, b) in enumerate(memory[schedule_name]))
        print(f"  {schedule_name:6s} {cells}")
    print(f"  stage 0 1f1b / gpipe bytes: {memory['1f1b'][0][1] / memory['gpipe'][0][1]:.3f} "
          f"(theory min(p, m) / m = {min(2, args.microbatches) / args.microbatches:.3f})")


if __name__ == "__main__":
    main()
