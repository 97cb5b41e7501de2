#!/usr/bin/env python3
"""Plain-PyTorch reference for ddx's GPT-2 and Llama models (model_reference_test).

Written from the architecture definitions, deliberately unlike the C++ code: explicit softmax
attention with a mask instead of scaled_dot_product_attention, LayerNorm/RMSNorm/GELU from
their formulas, GPT-2 Conv1D weights used in their stored [in, out] layout, RoPE on the two
halves of each head from frequencies computed in float64, and GQA by indexing KV heads.

Usage:
  reference_models.py --model-dir DIR --inputs inputs.safetensors --out out.safetensors
DIR holds config.json and model.safetensors (HF names). inputs holds int64 "tokens" and
"labels" [B, T] (labels already shifted, -100 ignored). out receives float32 "logits",
"loss" (sum over counted tokens / count), "loss_sum", and "grad.<hf name>" for every weight:
the gradient of "loss".
"""
import argparse
import json
import math
import os

import torch
from safetensors.torch import load_file, save_file


def layer_norm(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def rms_norm(x, weight, eps):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def causal_softmax_attention(q, k, v):
    """q, k, v: [B, H, T, hd] -> [B, T, H*hd]."""
    b, h, t, hd = q.shape
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
    future = torch.ones(t, t, dtype=torch.bool).triu(diagonal=1)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, t, h * hd)


def heads(x, n):
    b, t, d = x.shape
    return x.reshape(b, t, n, d // n).permute(0, 2, 1, 3)


def gpt2_logits(cfg, w, tokens):
    n_layer, n_head, eps = cfg["n_layer"], cfg["n_head"], cfg.get("layer_norm_epsilon", 1e-5)
    p = lambda name: w.get("transformer." + name, w.get(name))
    t = tokens.shape[1]
    x = p("wte.weight")[tokens] + p("wpe.weight")[torch.arange(t)]
    for i in range(n_layer):
        L = lambda name: p(f"h.{i}.{name}")
        a = layer_norm(x, L("ln_1.weight"), L("ln_1.bias"), eps)
        qkv = a @ L("attn.c_attn.weight") + L("attn.c_attn.bias")  # Conv1D: weight is [in, out]
        q, k, v = qkv.split(cfg["n_embd"], dim=-1)
        y = causal_softmax_attention(heads(q, n_head), heads(k, n_head), heads(v, n_head))
        x = x + y @ L("attn.c_proj.weight") + L("attn.c_proj.bias")
        m = layer_norm(x, L("ln_2.weight"), L("ln_2.bias"), eps)
        x = x + gelu_tanh(m @ L("mlp.c_fc.weight") + L("mlp.c_fc.bias")) @ L("mlp.c_proj.weight") + L("mlp.c_proj.bias")
    x = layer_norm(x, p("ln_f.weight"), p("ln_f.bias"), eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else p("wte.weight")
    return x @ head.t()


def rope_frequencies(cfg, head_dim):
    """Per-pair angular frequencies theta^(-2i/d), with Llama 3's piecewise rescaling."""
    theta = cfg.get("rope_theta", 10000.0)
    freqs = [theta ** (-2.0 * i / head_dim) for i in range(head_dim // 2)]
    s = cfg.get("rope_scaling")
    if s and s.get("rope_type", s.get("type")) == "llama3":
        orig, factor = s["original_max_position_embeddings"], s["factor"]
        lo, hi = s["low_freq_factor"], s["high_freq_factor"]
        scaled = []
        for f in freqs:
            wavelength = 2 * math.pi / f
            if wavelength < orig / hi:  # fast rotation: unchanged
                scaled.append(f)
            elif wavelength > orig / lo:  # slower than the original context: interpolated
                scaled.append(f / factor)
            else:  # in between: blend the two linearly in orig / wavelength
                blend = (orig / wavelength - lo) / (hi - lo)
                scaled.append((1 - blend) * f / factor + blend * f)
        freqs = scaled
    return torch.tensor(freqs, dtype=torch.float64)


def rotate(x, cos, sin):
    """Rotates the pairs (x[..., j], x[..., j + hd/2]) by the angle of frequency j."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def llama_logits(cfg, w, tokens):
    n_head = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    hd = cfg["hidden_size"] // n_head
    eps = cfg.get("rms_norm_eps", 1e-6)
    t = tokens.shape[1]
    angles = torch.arange(t, dtype=torch.float64)[:, None] * rope_frequencies(cfg, hd)[None, :]
    cos, sin = angles.cos().float(), angles.sin().float()
    kv_of_head = torch.arange(n_head) // (n_head // n_kv)  # query head h reads KV head h // group
    x = w["model.embed_tokens.weight"][tokens]
    for i in range(cfg["num_hidden_layers"]):
        L = lambda name: w[f"model.layers.{i}.{name}"]
        a = rms_norm(x, L("input_layernorm.weight"), eps)
        q = rotate(heads(a @ L("self_attn.q_proj.weight").t(), n_head), cos, sin)
        k = rotate(heads(a @ L("self_attn.k_proj.weight").t(), n_kv), cos, sin)
        v = heads(a @ L("self_attn.v_proj.weight").t(), n_kv)
        y = causal_softmax_attention(q, k[:, kv_of_head], v[:, kv_of_head])
        x = x + y @ L("self_attn.o_proj.weight").t()
        m = rms_norm(x, L("post_attention_layernorm.weight"), eps)
        gate = m @ L("mlp.gate_proj.weight").t()
        x = x + (gate * torch.sigmoid(gate) * (m @ L("mlp.up_proj.weight").t())) @ L("mlp.down_proj.weight").t()
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return x @ head.t()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    with open(os.path.join(args.model_dir, "config.json")) as f:
        cfg = json.load(f)
    weights = {k: v.float().requires_grad_(True) for k, v in load_file(os.path.join(args.model_dir, "model.safetensors")).items()}
    inputs = load_file(args.inputs)
    tokens, labels = inputs["tokens"].long(), inputs["labels"].long()

    forward = {"gpt2": gpt2_logits, "llama": llama_logits}[cfg["model_type"]]
    logits = forward(cfg, weights, tokens)
    counted = labels != -100
    safe_labels = labels.clamp(min=0)
    token_loss = torch.logsumexp(logits, dim=-1) - logits.gather(-1, safe_labels[..., None])[..., 0]
    loss_sum = (token_loss * counted).sum()
    loss = loss_sum / counted.sum()
    loss.backward()

    out = {"logits": logits.detach().contiguous(), "loss": loss.detach().reshape(()),
           "loss_sum": loss_sum.detach().reshape(())}
    for name, tensor in weights.items():
        out["grad." + name] = tensor.grad.contiguous()
    save_file(out, args.out)


if __name__ == "__main__":
    main()
