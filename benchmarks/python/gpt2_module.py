"""GPT-2 as a plain PyTorch nn.Module (nanoGPT style), the eager reference the trainer
benchmarks race against. Built from a Hugging Face style config.json as ddx writes it."""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, inner, eps):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.fc = nn.Linear(d, inner)
        self.fc_proj = nn.Linear(inner, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        inner = cfg.get("n_inner") or 4 * d
        eps = cfg.get("layer_norm_epsilon", 1e-5)
        self.wte = nn.Embedding(cfg["vocab_size"], d)
        self.wpe = nn.Embedding(cfg["n_positions"], d)
        self.blocks = nn.ModuleList(Block(d, cfg["n_head"], inner, eps) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(d, eps=eps)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied head


def load_config(path):
    with open(path) as f:
        return json.load(f)


def train_step(model, optimizer, tokens, labels):
    logits = model(tokens)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum") / labels.numel()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def median_step_seconds(model, optimizer, vocab, args, barrier):
    """Median seconds of a training step on random tokens (args.batch x args.seq) over
    args.steps steps, the first args.warmup untimed; `barrier` lines the ranks up before each."""
    import statistics
    import time

    times = []
    for step in range(args.steps):
        tokens = torch.randint(0, vocab, (args.batch, args.seq + 1))
        barrier()
        t0 = time.perf_counter()
        train_step(model, optimizer, tokens[:, :-1], tokens[:, 1:])
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)
