"""GPT-2 as a plain PyTorch nn.Module (nanoGPT style), the eager reference the trainer
benchmarks race against. Built from a Hugging Face style config.json as ddx writes it."""
import contextlib
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    """Causal self-attention; heads from the width this rank holds (all, or n_head / tp under
    tensor parallelism). `split_qkv`: q, k, v as three Linears, which a column-parallel plan
    splits per head (the fused c_attn would be split in row blocks instead)."""

    def __init__(self, d, heads, split_qkv):
        super().__init__()
        self.head_dim = d // heads
        if split_qkv:
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        else:
            self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        q, k, v = (self.q(x), self.k(x), self.v(x)) if hasattr(self, "q") else self.c_attn(x).chunk(3, dim=2)
        q, k, v = (z.view(b, t, -1, self.head_dim).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, -1))


class Mlp(nn.Module):
    def __init__(self, d, inner):
        super().__init__()
        self.c_fc = nn.Linear(d, inner)
        self.c_proj = nn.Linear(inner, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, heads, inner, eps, split_qkv):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = Attention(d, heads, split_qkv)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = Mlp(d, inner)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Embeddings(nn.Module):
    def __init__(self, vocab, positions, d):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)

    def forward(self, tokens):
        return self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))


class GPT2(nn.Module):
    """Module names are those of tests/python/reference_training.py's GPT-2, so that its
    tensor-parallel plan (tests/python/tp_reference.py) applies to this model too."""

    def __init__(self, cfg, split_qkv=False):
        super().__init__()
        d = cfg["n_embd"]
        inner = cfg.get("n_inner") or 4 * d
        eps = cfg.get("layer_norm_epsilon", 1e-5)
        self.embed = Embeddings(cfg["vocab_size"], cfg["n_positions"], d)
        self.blocks = nn.ModuleList(Block(d, cfg["n_head"], inner, eps, split_qkv) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(d, eps=eps)
        self.lm_head = nn.Linear(d, cfg["vocab_size"], bias=False)
        self.tie()
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def tie(self):
        """The head shares wte's weight (again after a parallel plan replaced either)."""
        self.lm_head.weight = self.embed.wte.weight

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def load_config(path):
    with open(path) as f:
        return json.load(f)


def train_step(model, optimizer, tokens, labels, loss_context=contextlib.nullcontext):
    """One step; `loss_context` wraps the loss and backward (loss_parallel for vocab-sharded logits)."""
    logits = model(tokens)
    with loss_context():
        loss = F.cross_entropy(logits.flatten(0, 1), labels.reshape(-1), reduction="sum") / labels.numel()
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return (loss.to_local() if hasattr(loss, "to_local") else loss).item()


def median_step_seconds(model, optimizer, vocab, args, barrier, loss_context=contextlib.nullcontext):
    """Median seconds of a training step on random tokens (args.batch x args.seq) over
    args.steps steps, the first args.warmup untimed; `barrier` lines the ranks up before each."""
    import statistics
    import time

    times = []
    for step in range(args.steps):
        tokens = torch.randint(0, vocab, (args.batch, args.seq + 1))
        barrier()
        t0 = time.perf_counter()
        train_step(model, optimizer, tokens[:, :-1], tokens[:, 1:], loss_context)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)
