#!/usr/bin/env python3
"""ddx's loss curve against PyTorch's on the same device (ci/gpu_check.sh step 7; runnable on
CPU with --device cpu --model debug, which is how CI checks this script).

The comparison is the reference tests' (tests/dist/reference_run.h): ddx writes its initial
weights (one step at --lr 0), both sides train --steps steps from them on a dataset of exactly
one global batch of text (byte tokenizer), so neither side's result depends on a sampler, and
the curves are compared step by step by `ddx compare` (the parity suite's tolerance). The
PyTorch side is tests/python/fsdp2_reference.py at one rank: PyTorch's own FSDP2 over a world
of one computes what a single device does.

  curve_check.py --ddx bin/ddx --reference-dir py --device cuda --model gpt2 --out DIR
Exit: ddx compare's (0: the curves agree; 1: they do not), or 1 when a step failed.
"""
import argparse
import json
import os
import subprocess
import sys

# The presets' shapes as Hugging Face GPT-2 configs: the reference reads only config files.
CONFIGS = {
    "gpt2": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12,
             "n_positions": 1024, "layer_norm_epsilon": 1e-5},
}


def one_global_batch_of_text(blocks, seq_length):
    """reference_run.cpp's text: ASCII words from a fixed LCG, blocks * seq_length bytes + newline."""
    words = ["the", "mason", "of", "Corul", "built", "a", "bridge", "over", "river", "and", "mill", "turned", "all",
             "day", "long", "while", "17", "+", "25", "=", "42."]
    size, out, x = blocks * seq_length, [], 12345
    total = 0
    while total < size:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        w = words[(x >> 16) % len(words)] + " "
        out.append(w)
        total += len(w)
    return "".join(out)[:size] + "\n"


def run(cmd, log):
    print("curve_check: " + " ".join(cmd), flush=True)
    with open(log, "w") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        with open(log) as f:
            tail = f.read().strip().splitlines()[-3:]
        sys.exit(f"curve_check: {os.path.basename(log)}: exit {done.returncode}: " + " | ".join(tail))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--reference-dir", required=True, help="folder with fsdp2_reference.py and its modules")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--model", choices=["debug"] + sorted(CONFIGS), default="gpt2")
    p.add_argument("--out", required=True, help="a new folder for both runs' files")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--blocks", type=int, default=4, help="sequences per step: the whole dataset")
    p.add_argument("--lr", type=float, default=3e-4)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=False)
    out = os.path.abspath(args.out)
    data = os.path.join(out, "data.txt")
    with open(data, "w") as f:
        f.write(one_global_batch_of_text(args.blocks, args.seq))
    model = args.model
    if model in CONFIGS:
        model = os.path.join(out, model)
        os.makedirs(model)
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(CONFIGS[args.model], f)
    train = [args.ddx, "train", "-m", model, "-d", data, "-s", str(args.seq), "-b", str(args.blocks), "--seed", "7",
             "--device", args.device, "--log-freq", "1", "--no-progress"]
    init = os.path.join(out, "init.safetensors")
    run(train + ["--lr", "0", "--max-steps", "1", "--final-weights", init, "--save-dir", os.path.join(out, "init"),
                 "--metrics-file", os.path.join(out, "init", "metrics.jsonl")], os.path.join(out, "init.log"))
    ddx_metrics = os.path.join(out, "ddx", "metrics.jsonl")
    run(train + ["--lr", str(args.lr), "--max-steps", str(args.steps), "--save-dir", os.path.join(out, "ddx"),
                 "--metrics-file", ddx_metrics], os.path.join(out, "ddx.log"))
    reference = os.path.join(out, "pytorch.json")
    run([sys.executable, os.path.join(args.reference_dir, "fsdp2_reference.py"), "--data", data, "--init", init,
         "--model", model, "--seq-length", str(args.seq), "--steps", str(args.steps), "--lr", str(args.lr),
         "--batch-size", str(args.blocks), "--nproc", "1", "--device", args.device, "--out", reference],
        os.path.join(out, "pytorch.log"))
    # ddx compare reads JSON lines with a step key: the reference's arrays, one line a step.
    with open(reference) as f:
        ref = json.load(f)
    ref_lines = os.path.join(out, "pytorch.jsonl")
    with open(ref_lines, "w") as f:
        for i, (loss, norm) in enumerate(zip(ref["losses"], ref["grad_norms"])):
            f.write(json.dumps({"step": i + 1, "loss": loss, "grad_norm": norm}) + "\n")
    done = subprocess.run([args.ddx, "compare", ref_lines, ddx_metrics], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end="")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
