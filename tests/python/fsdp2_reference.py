#!/usr/bin/env python3
"""PyTorch FSDP2 reference run for `ddx train --strategy fsdp` (fsdp_reference_test).

Trains ddx's GPT-2 with PyTorch's own FSDP2 (torch.distributed.fsdp.fully_shard on every block,
then on the root; Gloo on 127.0.0.1, CPU) from the same initial weights, on the same tokens,
with the same loss normalisation, optimizer and learning-rate schedule as `ddx train`, and
writes the per-step losses as JSON.

The model's math comes from reference_models.py (written independently of the C++ code); here
it is wrapped in modules whose parameter names and shapes are ddx's (Linear layout [out, in]),
so that fully_shard can shard each block and ddx's safetensors load as they are.

Identical batches. ddx's sampler shuffles the blocks of each epoch with its own PRNG; rather
than reimplementing it, the data must hold exactly one global batch of blocks:
num_blocks = (tokens - 1) // seq_length == ranks x batch_size. Then every step trains on all
blocks, and the loss and the summed gradient do not depend on which rank reads which block.
The script refuses any other block count.

Tokens: a plain text file read as ddx's byte tokenizer does (UTF-8 BOM dropped, a newline
appended unless the text ends with one), or a ddx token cache (*.ddxtok, see docs/data.md).

Loss: sum of token cross-entropies over the global batch / global token count. Each rank
backpropagates its local sum times 1/global tokens and FSDP2's reduce-scatter SUMS gradients
(gradient divide factor 1), exactly as ddx does: no division by the world size.

Optimizer: torch.optim.AdamW (single-tensor path, weight decay as given, betas 0.9/0.999,
eps 1e-8) with ddx's schedule (trainers/train/lr_schedule.cpp) set before every step.

Processes: under `ddx launch` / torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the
environment) each process is one rank; otherwise the script spawns --nproc ranks itself.

  fsdp2_reference.py --data data.txt --init init.safetensors --seq-length 32 --batch-size 4 \
      --steps 20 --lr 3e-3 --out losses.json [--nproc 2] [--final-weights final.safetensors]

--init: safetensors with ddx parameter names (`ddx train --final-weights`, e.g. after one step
at --lr 0) or Hugging Face GPT-2 names (`--init-from` files). Output JSON: {"losses": [...],
"grad_norms": [...], "lrs": [...], "step_ms": [...], "world_size": N, "tokens_per_step": n}.
"""
import argparse
import json
import math
import os
import socket
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_models as ref  # noqa: E402

# ddx's `debug` preset (trainers/models/model_config.cpp), as a Hugging Face GPT-2 config.
DEBUG_CONFIG = {"model_type": "gpt2", "vocab_size": 259, "n_embd": 35, "n_layer": 3, "n_head": 5,
                "n_positions": 131, "n_inner": 137, "layer_norm_epsilon": 1e-5}


# --- model: ddx names and shapes, reference_models.py's math --------------------------------

class Linear(nn.Module):
    def __init__(self, d_in, d_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        self.bias = nn.Parameter(torch.empty(d_out)) if bias else None

    def forward(self, x):
        y = x @ self.weight.t()
        return y if self.bias is None else y + self.bias


class LayerNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d))
        self.bias = nn.Parameter(torch.empty(d))

    def forward(self, x):
        return ref.layer_norm(x, self.weight, self.bias, self.eps)


class Embedding(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, d))

    def forward(self, ids):
        return self.weight[ids]


class Attention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.d, self.n_head = d, n_head
        self.c_attn = Linear(d, 3 * d)
        self.c_proj = Linear(d, d)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(self.d, dim=-1)
        y = ref.causal_softmax_attention(ref.heads(q, self.n_head), ref.heads(k, self.n_head), ref.heads(v, self.n_head))
        return self.c_proj(y)


class Mlp(nn.Module):
    def __init__(self, d, inner):
        super().__init__()
        self.c_fc = Linear(d, inner)
        self.c_proj = Linear(inner, d)

    def forward(self, x):
        return self.c_proj(ref.gelu_tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, eps = cfg["n_embd"], cfg.get("layer_norm_epsilon", 1e-5)
        self.ln_1 = LayerNorm(d, eps)
        self.attn = Attention(d, cfg["n_head"])
        self.ln_2 = LayerNorm(d, eps)
        self.mlp = Mlp(d, cfg.get("n_inner") or 4 * d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, cfg, tied):
        super().__init__()
        d = cfg["n_embd"]
        self.wte = Embedding(cfg["vocab_size"], d)
        self.wpe = Embedding(cfg["n_positions"], d)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"]))
        self.ln_f = LayerNorm(d, cfg.get("layer_norm_epsilon", 1e-5))
        self.lm_head = None if tied else Linear(d, cfg["vocab_size"], bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        head = self.wte.weight if self.lm_head is None else self.lm_head.weight
        return x @ head.t()


def ddx_names(weights):
    """Hugging Face GPT-2 names -> ddx names (Conv1D weights transposed); ddx names unchanged."""
    if "wte.weight" in weights and "transformer.wte.weight" not in weights and not any(k.startswith("h.") for k in weights):
        return weights
    out = {}
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    for name, t in weights.items():
        n = name[len("transformer."):] if name.startswith("transformer.") else name
        if n.endswith(".attn.bias") or n.endswith(".attn.masked_bias"):
            continue  # causal-mask buffers of some HF files
        if n.startswith("h."):
            i, rest = n[2:].split(".", 1)
            n = f"blocks.{i}.{rest}"
            if rest in conv1d:
                t = t.t().contiguous()
        out[n] = t
    return out


def load_config(spec):
    if spec == "debug":
        return dict(DEBUG_CONFIG)
    path = os.path.join(spec, "config.json") if os.path.isdir(spec) else spec
    with open(path) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "gpt2":
        raise SystemExit(f"{path}: only GPT-2 configs are supported here")
    return cfg


# --- data --------------------------------------------------------------------------------------

def read_tokens(path):
    """The token stream of a plain text file under ddx's byte tokenizer, or of a ddx token cache."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] == b"DDXTOKS\0":
        version, header, count = struct.unpack_from("<IIQ", raw, 8)
        if version != 1 or header != 128 or len(raw) != header + 4 * count:
            raise SystemExit(f"{path}: unsupported or truncated ddx token cache")
        return torch.frombuffer(bytearray(raw[header:]), dtype=torch.int32).long()  # uint32 < 2^31
    raw.decode("utf-8")  # ddx refuses invalid UTF-8 too
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.endswith(b"\n"):
        raw += b"\n"
    return torch.tensor(list(raw), dtype=torch.long)


def global_blocks(tokens, seq_length, global_batch):
    num_blocks = (tokens.numel() - 1) // seq_length
    if num_blocks != global_batch:
        raise SystemExit(f"the data has {num_blocks} blocks of {seq_length + 1} tokens; this reference needs exactly one "
                         f"global batch ({global_batch}) so that every step trains on all of them")
    return torch.stack([tokens[i * seq_length: i * seq_length + seq_length + 1] for i in range(num_blocks)])


def learning_rate(step, peak, warmup, decay):
    """trainers/train/lr_schedule.cpp: linear warmup, cosine to peak/100 over `decay` steps, flat."""
    if step < warmup:
        return peak * (step + 1) / warmup
    lo = peak * 0.01
    t = step - warmup
    if t >= decay:
        return lo
    return lo + (peak - lo) * 0.5 * (1.0 + math.cos(math.pi * t / decay))


# --- training ----------------------------------------------------------------------------------

def local_tensor(t):
    return t.to_local() if hasattr(t, "to_local") else t


def train(rank, world, args):
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = load_config(args.model)
    weights = ddx_names({k: v.float() for k, v in load_file(args.init).items()})
    model = GPT2(cfg, tied="lm_head.weight" not in weights)
    missing = set(dict(model.named_parameters())) ^ set(weights)
    if missing:
        raise SystemExit(f"{args.init}: parameters do not match the model: {sorted(missing)[:8]}")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.shape != weights[name].shape:
                raise SystemExit(f"{args.init}: {name} has shape {list(weights[name].shape)}, expected {list(p.shape)}")
            p.copy_(weights[name])

    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    for m in model.modules():
        if hasattr(m, "set_gradient_divide_factor"):
            # A plain SUM reduce-scatter: the loss is already divided by the global token count.
            # (A divide factor alone becomes PREMUL_SUM, which Gloo lacks; forced SUM then divides by 1.)
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=args.weight_decay, foreach=False)
    blocks = global_blocks(read_tokens(args.data), args.seq_length, world * args.batch_size)
    mine = blocks[rank * args.batch_size:(rank + 1) * args.batch_size]
    inputs, labels = mine[:, :-1].contiguous(), mine[:, 1:].contiguous()
    global_tokens = torch.tensor([labels.numel()], dtype=torch.int64)
    dist.all_reduce(global_tokens)
    global_tokens = int(global_tokens.item())

    losses, grad_norms, lrs, step_ms = [], [], [], []
    for step in range(args.steps):
        lr = learning_rate(step, args.lr, args.warmup_steps, args.lr_decay_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        t0 = time.perf_counter()
        logits = model(inputs)
        loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), reduction="sum")
        (loss_sum * (1.0 / global_tokens)).backward()
        # Global gradient norm (diagnostics): local shards' squares summed over ranks.
        sq = torch.zeros((), dtype=torch.float64)
        for p in model.parameters():
            if p.grad is not None:
                sq += local_tensor(p.grad).double().pow(2).sum()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stats = torch.stack([loss_sum.detach().double(), sq])
        dist.all_reduce(stats)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(stats[0].item() / global_tokens)
        grad_norms.append(math.sqrt(stats[1].item()))
        lrs.append(lr)
        if rank == 0 and args.verbose:
            print(f"step {step + 1} loss {losses[-1]:.8f} grad_norm {grad_norms[-1]:.6f} lr {lr:.6g}", flush=True)

    full = {name: p.full_tensor().detach().contiguous() if hasattr(p, "full_tensor") else p.detach().contiguous()
            for name, p in model.named_parameters()}
    if rank == 0:
        if args.final_weights:
            save_file(full, args.final_weights)
        with open(args.out, "w") as f:
            json.dump({"losses": losses, "grad_norms": grad_norms, "lrs": lrs, "step_ms": step_ms,
                       "world_size": world, "tokens_per_step": global_tokens}, f)


def worker(rank, world, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    run(rank, world, args)


def run(rank, world, args):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        train(rank, world, args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="plain text file (byte tokenizer) or a ddx token cache (*.ddxtok)")
    p.add_argument("--init", required=True, help="initial weights (safetensors, ddx or HF GPT-2 names)")
    p.add_argument("--model", default="debug", help="debug, or a GPT-2 config.json (or its folder)")
    p.add_argument("--seq-length", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True, help="sequences per rank (ddx's -b)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--lr-decay-steps", type=int, default=1000)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--nproc", type=int, default=2, help="ranks to spawn when not started by a launcher")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--out", required=True, help="JSON file for the per-step losses")
    p.add_argument("--final-weights", help="write the final full parameters (safetensors, ddx names)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(worker, args=(args.nproc, port, args), nprocs=args.nproc, join=True, start_method="spawn")


if __name__ == "__main__":
    main()
