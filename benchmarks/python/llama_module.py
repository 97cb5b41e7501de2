"""Llama as a plain PyTorch nn.Module computing what HF LlamaForCausalLM computes (RMSNorm in
float32 as HF writes it, rotate_half RoPE, repeat_kv GQA, SDPA), the eager reference the
trainer benchmark races against for Llama shapes. Built from an HF-style config.json."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RmsNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.heads = cfg["hidden_size"], cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.hd = d // self.heads
        eps, inner = cfg.get("rms_norm_eps", 1e-6), cfg["intermediate_size"]
        self.attn_norm, self.mlp_norm = RmsNorm(d, eps), RmsNorm(d, eps)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, self.kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, self.kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, inner, bias=False), nn.Linear(d, inner, bias=False)
        self.down = nn.Linear(inner, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        a = self.attn_norm(x)
        q = self.q(a).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(a).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(a).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, -1))
        m = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(m)) * self.up(m))


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["hidden_size"]
        self.embed = nn.Embedding(cfg["vocab_size"], d)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RmsNorm(d, cfg.get("rms_norm_eps", 1e-6))
        self.lm_head = nn.Linear(d, cfg["vocab_size"], bias=False)
        if cfg.get("tie_word_embeddings", False):
            self.lm_head.weight = self.embed.weight
        hd = d // cfg["num_attention_heads"]
        self.inv_freq = 1.0 / cfg.get("rope_theta", 10000.0) ** (torch.arange(0, hd, 2).float() / hd)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        freqs = torch.outer(torch.arange(tokens.shape[1]).float(), self.inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.lm_head(self.norm(x))
