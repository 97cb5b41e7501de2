#!/usr/bin/env python3
"""Tokens/s of `ddx train` (single strategy) against an equivalent PyTorch eager training loop
on the same model shape, batch, thread count and machine, measured in the same run: the two
sides alternate for --rounds runs each (so a change in the machine's load hits both), and the
ratio (ddx / PyTorch; > 1 means ddx is faster) is of the medians over every timed step, with
each round's own ratio shown as the noise. Also compares peak RSS (whole process, each side in
its own process).

With --profile DIR both sides are then profiled for a few steps (`ddx train --profile DIR/ddx`;
torch.profiler into DIR/eager_trace.json) and the per-phase and op-by-op tables are printed
side by side (docs/performance.md).

On a GPU (`--device cuda`, the GPU check's step 7, docs/gpu.md) both sides train on the device in
`--dtype` (fp32, or bf16 weights and optimizer state as `ddx train --dtype bf16`), the step is
timed to a device synchronisation, and the peak GPU memory of each side is compared; `--compile`
adds a third side, the eager model under torch.compile. `--json FILE` writes the medians, the
ratios, ddx's MFU and the peaks for scripts.

  .venv/bin/python benchmarks/train_throughput.py --ddx build/bin/ddx [--model gpt2] [--batch 2] [--seq 128]
  python3 train_throughput.py --ddx bin/ddx --device cuda --dtype bf16 --batch 8 --seq 1024 --compile --json t.json
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from gpt2_module import GPT2, train_step  # noqa: E402
from llama_module import Llama  # noqa: E402

# HF-style configs of ddx's GPT-2 presets (docs/models.md).
PRESETS = {
    "gpt2": {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024},
    "gpt2-medium": {"vocab_size": 50257, "n_embd": 1024, "n_layer": 24, "n_head": 16, "n_positions": 1024},
    "debug": {"vocab_size": 259, "n_embd": 35, "n_layer": 3, "n_head": 5, "n_positions": 131, "n_inner": 137},
}
# Llama shapes ddx has no preset for: ddx gets the HF config.json written here.
LLAMA_PRESETS = {
    "llama-100m": {"model_type": "llama", "vocab_size": 32000, "hidden_size": 768, "intermediate_size": 2048,
                   "num_hidden_layers": 8, "num_attention_heads": 12, "num_key_value_heads": 4,
                   "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                   "tie_word_embeddings": False},
}
PROFILE_STEPS = 3


def config_of(name):
    return LLAMA_PRESETS[name] if name in LLAMA_PRESETS else PRESETS[name]


def ddx_model(args, workdir):
    """-m for ddx: the preset, or a folder holding the Llama shape's config.json."""
    if args.model not in LLAMA_PRESETS:
        return args.model
    folder = os.path.join(workdir, args.model)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(LLAMA_PRESETS[args.model], f)
    return folder


def ddx_run(args, workdir, extra=(), steps=None):
    """One `ddx train` run; its metrics records after the warmup steps."""
    metrics = os.path.join(workdir, "ddx.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.ddx, "train", "-m", ddx_model(args, workdir), "-b", str(args.batch), "-s", str(args.seq),
           "--max-steps", str(steps or args.steps), "--log-freq", "1", "--no-progress", "--lr", "1e-4",
           "--metrics-file", metrics, "--save-dir", workdir, "--device", args.device, "--dtype", args.dtype,
           *(["--fused-adamw"] if args.fused_adamw else []),
           *args.ddx_flags.split(), *extra]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    if done.returncode != 0:
        sys.exit(f"ddx failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    with open(metrics) as f:
        return [json.loads(line) for line in f][args.warmup:]


def eager_args(args):
    """The eager worker's command line (its own process: its peak RSS is its own)."""
    return [sys.executable, os.path.abspath(__file__), "--eager-worker", "--ddx", args.ddx, "--model", args.model,
            "--batch", str(args.batch), "--seq", str(args.seq), "--threads", str(args.threads),
            "--device", args.device, "--dtype", args.dtype, *(["--fused-adamw"] if args.fused_adamw else [])]


def eager_run(args, compiled=False):
    """The PyTorch side: {rates, peak_rss_bytes, peak_gpu_bytes}; `compiled`: under torch.compile
    (its compilation happens in the warmup steps, which are not timed)."""
    cmd = eager_args(args) + ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    cmd += ["--compiled"] if compiled else []
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True,
                          env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    return json.loads(done.stdout.strip().splitlines()[-1])


def eager_step(model, optimizer, tokens):
    """gpt2_module.train_step with the phases named as ddx names them, for the profile."""
    from torch.profiler import record_function
    with record_function("ddx::step"):
        with record_function("ddx::forward"):
            logits = model(tokens[:, :-1])
        with record_function("ddx::loss"):
            labels = tokens[:, 1:]
            loss = F.cross_entropy(logits.flatten(0, 1), labels.reshape(-1), reduction="sum") / labels.numel()
        with record_function("ddx::backward"):
            loss.backward()
        with record_function("ddx::optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss.item()


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def eager_worker(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = config_of(args.model)
    model = Llama(cfg) if cfg.get("model_type") == "llama" else GPT2(cfg)
    model = model.to(device=args.device, dtype=torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0, fused=True if args.fused_adamw else None)
    step_model = torch.compile(model) if args.compiled else model
    vocab = cfg["vocab_size"]
    rates = []
    for step in range(args.steps):
        tokens = torch.randint(0, vocab, (args.batch, args.seq + 1), device=args.device)
        synchronize(args.device)
        t0 = time.perf_counter()
        train_step(step_model, optimizer, tokens[:, :-1], tokens[:, 1:])
        synchronize(args.device)
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            rates.append(args.batch * args.seq / dt)
    result = {"rates": rates, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "peak_gpu_bytes": torch.cuda.max_memory_allocated() if args.device == "cuda" else None}
    if args.eager_profile:
        result["profile"] = eager_profile(model, optimizer, vocab, args)
    print(json.dumps(result))


def eager_profile(model, optimizer, vocab, args):
    """PROFILE_STEPS steps under torch.profiler: phase and op self times in ms per step."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(PROFILE_STEPS):
            eager_step(model, optimizer, torch.randint(0, vocab, (args.batch, args.seq + 1)))
    prof.export_chrome_trace(args.eager_profile)
    phases, ops = {}, {}
    for e in prof.key_averages():
        if e.key.startswith("ddx::"):
            phases[e.key[5:]] = e.cpu_time_total / 1e3 / PROFILE_STEPS
        else:
            ops[e.key] = {"self_ms": e.self_cpu_time_total / 1e3 / PROFILE_STEPS, "calls": e.count / PROFILE_STEPS}
    return {"phases": phases, "ops": ops}


def ddx_profile(args, workdir):
    """`ddx train --profile` over PROFILE_STEPS steps after one warmup step: its profile.json."""
    out = os.path.join(args.profile, "ddx")
    ddx_run(args, workdir, ["--profile", out, "--profile-steps", str(PROFILE_STEPS)], steps=PROFILE_STEPS + 1)
    with open(os.path.join(out, "profile.json")) as f:
        summary = json.load(f)
    phases = {}
    for row in summary["phases"]:
        top = row["phase"].split(".")[0]
        phases[top] = phases.get(top, 0.0) + row["ms"]
    phases["step"] = summary["step_ms"]
    return {"phases": phases, "ops": {op["op"]: op for op in summary["ops"]}}


def print_profiles(ddx, eager, top=20):
    print(f"\nper phase, ms per step (profiled, {PROFILE_STEPS} steps each; eager 'step' includes Python)")
    print(f"{'phase':24s} {'ddx':>10s} {'eager':>10s} {'eager/ddx':>10s}")
    for phase in ["data", "forward", "loss", "backward", "comm_wait", "optimizer", "other", "step"]:
        d, e = ddx["phases"].get(phase, 0.0), eager["phases"].get(phase, 0.0)
        ratio = f"{e / d:10.2f}" if d > 0 and e > 0 else f"{'':>10s}"
        print(f"{phase:24s} {d:10.2f} {e:10.2f} {ratio}")
    names = set(ddx["ops"]) | set(eager["ops"])
    cost = {n: max(ddx["ops"].get(n, {}).get("self_ms", 0.0), eager["ops"].get(n, {}).get("self_ms", 0.0))
            for n in names}
    print(f"\nop by op: self ms per step (the {top} costliest on either side)")
    print(f"{'op':56s} {'ddx':>9s} {'eager':>9s} {'eager/ddx':>10s}")
    for name in sorted(names, key=lambda n: -cost[n])[:top]:
        d = ddx["ops"].get(name, {}).get("self_ms", 0.0)
        e = eager["ops"].get(name, {}).get("self_ms", 0.0)
        ratio = f"{e / d:10.2f}" if d > 0 and e > 0 else f"{'':>10s}"
        label = name if len(name) <= 56 else name[:53] + "..."
        print(f"{label:56s} {d:9.2f} {e:9.2f} {ratio}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--model", default="gpt2", choices=sorted(PRESETS) + sorted(LLAMA_PRESETS))
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=8, help="steps per run")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps at the start of each run")
    p.add_argument("--rounds", type=int, default=3, help="runs of each side, alternating")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of both sides")
    p.add_argument("--profile", metavar="DIR", help="then profile both sides and compare them op by op")
    p.add_argument("--fused-adamw", action="store_true",
                   help="both sides use the fused AdamW kernel (ddx --fused-adamw, torch.optim.AdamW(fused=True))")
    p.add_argument("--ddx-flags", default="",
                   help="more flags for ddx train only, e.g. --ddx-flags=--fused-adamw (ddx's fast path against eager's default)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where both sides train")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                   help="both sides' weights and optimizer state (ddx train --dtype)")
    p.add_argument("--compile", action="store_true", help="also race the eager model under torch.compile")
    p.add_argument("--json", metavar="FILE", help="write the medians, ratios, MFU and peaks as JSON")
    p.add_argument("--eager-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--eager-profile", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.eager_worker:
        return eager_worker(args)
    ddx_rates, eager_rates, compiled_rates, round_ratios, ddx_rss, eager_rss = [], [], [], [], 0, 0
    ddx_gpu, eager_gpu, compiled_gpu, mfus = 0, 0, 0, []
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.rounds):
            records = ddx_run(args, workdir)
            d = [r["tokens_per_s"] for r in records]
            ddx_rss = max(ddx_rss, max(r["peak_rss_bytes"] for r in records))
            ddx_gpu = max([ddx_gpu] + [r.get("gpu_peak_allocated_bytes") or 0 for r in records])
            mfus += [r["mfu"] for r in records if r.get("mfu") is not None]
            eager = eager_run(args)
            eager_rss = max(eager_rss, eager["peak_rss_bytes"])
            eager_gpu = max(eager_gpu, eager.get("peak_gpu_bytes") or 0)
            ddx_rates += d
            eager_rates += eager["rates"]
            round_ratios.append(statistics.median(d) / statistics.median(eager["rates"]))
            if args.compile:
                compiled = eager_run(args, compiled=True)
                compiled_rates += compiled["rates"]
                compiled_gpu = max(compiled_gpu, compiled.get("peak_gpu_bytes") or 0)
        d, r = statistics.median(ddx_rates), statistics.median(eager_rates)
        print(f"model {args.model}, batch {args.batch} x {args.seq} tokens, {args.rounds} alternating rounds of "
              f"{args.steps - args.warmup} timed steps per side, torch {torch.__version__}, "
              + (f"{args.device}, {args.dtype}" if args.device == "cuda" else f"{args.threads} thread(s) each")
              + (", fused AdamW on both" if args.fused_adamw else "")
              + (f", ddx train {args.ddx_flags}" if args.ddx_flags else ""))
        memory = "peak GPU MiB" if args.device == "cuda" else "peak RSS MiB"
        peak = (lambda gpu, rss: gpu) if args.device == "cuda" else (lambda gpu, rss: rss)
        print(f"{'':24s} {'median tokens/s':>16s} {memory:>13s}")
        print(f"{'ddx train (C++)':24s} {d:16.1f} {peak(ddx_gpu, ddx_rss) / 2**20:13.0f}")
        print(f"{'PyTorch eager (Python)':24s} {r:16.1f} {peak(eager_gpu, eager_rss) / 2**20:13.0f}")
        c = statistics.median(compiled_rates) if compiled_rates else None
        if c is not None:
            print(f"{'PyTorch torch.compile':24s} {c:16.1f} {compiled_gpu / 2**20 if args.device == 'cuda' else 0:13.0f}")
        print(f"ratio ddx / PyTorch: {d / r:.3f} (per round: {', '.join(f'{x:.3f}' for x in round_ratios)})")
        if c is not None:
            print(f"ratio ddx / torch.compile: {d / c:.3f}")
        if args.device == "cuda":
            print(f"peak GPU memory ddx / PyTorch: {ddx_gpu / eager_gpu:.3f}" if eager_gpu else "peak GPU memory: not read")
        else:
            print(f"peak RSS ddx / PyTorch: {ddx_rss / eager_rss:.3f}")
        if args.json:
            summary = {"model": args.model, "device": args.device, "dtype": args.dtype, "batch": args.batch,
                       "seq": args.seq, "torch": torch.__version__, "ddx_tokens_per_s": d, "eager_tokens_per_s": r,
                       "compiled_tokens_per_s": c, "ratio_vs_eager": d / r,
                       "ratio_vs_compiled": d / c if c else None,
                       "ddx_mfu": statistics.median(mfus) if mfus else None,
                       "ddx_peak_gpu_bytes": ddx_gpu or None, "eager_peak_gpu_bytes": eager_gpu or None,
                       "compiled_peak_gpu_bytes": compiled_gpu or None,
                       "ddx_peak_rss_bytes": ddx_rss, "eager_peak_rss_bytes": eager_rss}
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=2)
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
            ddx = ddx_profile(args, workdir)
            args.eager_profile = os.path.join(os.path.abspath(args.profile), "eager_trace.json")
            cmd = eager_args(args) + ["--steps", "1", "--warmup", "0", "--eager-profile", args.eager_profile]
            done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True,
                                  env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
            print_profiles(ddx, json.loads(done.stdout.strip().splitlines()[-1])["profile"])


if __name__ == "__main__":
    main()
