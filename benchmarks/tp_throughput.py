#!/usr/bin/env python3
"""ddx tensor parallelism (`ddx train --strategy tp --tp N`) against PyTorch's DTensor tensor
parallelism (parallelize_module with tests/python/tp_reference.py's Megatron plan, the one the
reference test proves, and loss_parallel) on the same model, batch, sequence length and
backend (Gloo, CPU), in the same run. Prints tokens/s and step time of both and the ratio
ddx/PyTorch (> 1: ddx is faster).

  .venv/bin/python benchmarks/tp_throughput.py --ddx build/bin/ddx [--model gpt2] [--batch 1] [--seq 128] \
      [--sequence-parallel]

Every rank is one tensor-parallel rank and trains on the whole batch (--batch sequences per
step). --sequence-parallel turns sequence parallelism on on both sides; --ddx-flags passes more
flags to ddx train (write it with '=').
"""
import argparse
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "python"))
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests", "python"))
from gpt2_module import GPT2  # noqa: E402
from race import ddx_medians, pytorch_step_ms  # noqa: E402
from train_throughput import PRESETS  # noqa: E402
from tp_reference import parallel_plan  # noqa: E402


def pytorch_tp(rank, world, args):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    cfg = PRESETS[args.model]
    model = GPT2(cfg, split_qkv=True)
    parallelize_module(model, init_device_mesh("cpu", (world,)), parallel_plan(cfg["n_layer"], args.sequence_parallel))
    model.tie()  # the plan replaced wte's and lm_head's weights by separate DTensors
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--model", default="gpt2", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=1, help="sequences per step (every rank reads all of them)")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--ranks", type=int, default=2, help="tensor-parallel size = world size")
    p.add_argument("--sequence-parallel", action="store_true", help="on both sides")
    p.add_argument("--ddx-flags", default="", help="more ddx train flags, e.g. --ddx-flags='--check-collectives'")
    args = p.parse_args()
    if args.steps <= args.warmup:
        p.error("--steps must exceed --warmup")
    if PRESETS[args.model]["n_head"] % args.ranks:
        p.error(f"--ranks {args.ranks} does not divide the {PRESETS[args.model]['n_head']} heads of {args.model}")
    from torch.distributed.tensor.parallel import loss_parallel

    extra = ["--strategy", "tp", "--tp", str(args.ranks)] + (["--sequence-parallel"] if args.sequence_parallel else [])
    with tempfile.TemporaryDirectory() as workdir:
        _, ddx_ms, ddx_wait = ddx_medians(args, workdir, args.ranks, extra + args.ddx_flags.split())
    torch_ms = pytorch_step_ms(pytorch_tp, args, args.ranks, PRESETS[args.model]["vocab_size"], loss_parallel)
    # Tokens/s from the step times: every rank trains on the same args.batch sequences.
    ddx_tps, torch_tps = (args.batch * args.seq / ms * 1e3 for ms in (ddx_ms, torch_ms))
    label = f"ddx tp{' + sp' if args.sequence_parallel else ''}" + (f" {args.ddx_flags}" if args.ddx_flags else "")
    print(f"model {args.model}, tp {args.ranks} x {args.batch} x {args.seq} tokens, Gloo, OMP_NUM_THREADS=1, "
          f"sequence parallel: {'yes' if args.sequence_parallel else 'no'}, "
          f"{args.steps - args.warmup} timed steps (medians), torch {torch.__version__}")
    print(f"{'':28s} {'tokens/s':>10s} {'step ms':>10s}")
    print(f"{label:28s} {ddx_tps:10.1f} {ddx_ms:10.1f}   (comm wait {ddx_wait:.1f} ms)")
    print(f"{'PyTorch DTensor TP':28s} {torch_tps:10.1f} {torch_ms:10.1f}")
    print(f"ratio {label} / PyTorch DTensor TP tokens/s: {ddx_tps / torch_tps:.3f}")


if __name__ == "__main__":
    main()
