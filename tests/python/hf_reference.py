#!/usr/bin/env python3
"""transformers' own GPT-2 and Llama as the reference for `ddx train -m config.json` (hf_reference_test).

ddx reads a Hugging Face config.json itself (trainers/models/hf_config.cpp); this script lets the
installed transformers read the same file, build GPT2LMHeadModel / LlamaForCausalLM from it, load
ddx's initial weights (ddx names mapped to Hugging Face's, as trainers/models/hf_checkpoint.cpp
maps them) and train with ddx's loss normalisation, schedule, clipping and AdamW
(reference_training.py) on the same tokens. Whatever ddx misreads in the config (a RoPE theta or
scaling in a layout it does not know, ...) shows up as a different loss from the first step.

One process, no parallelism: ddx's single-device and tensor-parallel runs are both compared with
this. Attention is transformers' "sdpa" implementation: its "eager" one takes Llama's softmax in
float32 whatever the model's dtype, which alone put 1e-7 (loss) and 1e-6 (gradient norm) between
it and ddx in float64. RoPE's frequencies and cos/sin are float32 in transformers whatever the
dtype, and ddx computes them the same way (trainers/models/layers.cpp: rope_tables).

  hf_reference.py --write-config llama|gpt2 OUT.json     (a small config in the installed version's layout)
  hf_reference.py --data data.txt --init init.safetensors --model config.json --seq-length 32 \
      --batch-size 8 --steps 6 --lr 3e-3 --dtype fp64 --out record.json [--final-weights w.safetensors]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_training as rt  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local files only: never reach the Hub
import transformers  # noqa: E402

# Small models whose every setting matters at 32 tokens: Llama's llama3 RoPE scaling reaches the
# low frequencies of an 8-wide head (wavelengths above 64 / low_freq_factor), grouped KV heads
# (8 query, 2 key/value) split over 2 TP ranks, and vocabularies no TP size divides. The norms'
# epsilons are values no default has (ddx's presets and its fallbacks use 1e-5 and 1e-6,
# transformers' 1e-5 and 1e-6): a ddx norm that ignored the config's would still pass otherwise.
LLAMA_RMS_NORM_EPS = 3e-6
GPT2_LAYER_NORM_EPS = 3e-5
LLAMA = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2, intermediate_size=96,
             vocab_size=1001, max_position_embeddings=256, rms_norm_eps=LLAMA_RMS_NORM_EPS, tie_word_embeddings=False,
             attention_dropout=0.0)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
GPT2 = dict(vocab_size=1001, n_embd=48, n_layer=2, n_head=4, n_inner=137, n_positions=131,
            layer_norm_epsilon=GPT2_LAYER_NORM_EPS,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def write_config(kind, out):
    if kind == "llama":
        major = int(transformers.__version__.split(".")[0])
        rope = dict(rope_parameters=LLAMA3_ROPE) if major >= 5 else dict(
            rope_theta=LLAMA3_ROPE["rope_theta"], rope_scaling={k: v for k, v in LLAMA3_ROPE.items() if k != "rope_theta"})
        config = transformers.LlamaConfig(**LLAMA, **rope)
    else:
        config = transformers.GPT2Config(**GPT2, bos_token_id=0, eos_token_id=0)
    config.to_json_file(out)


def hf_name(name, family):
    """ddx's parameter name -> (Hugging Face's, transposed?) as trainers/models/hf_checkpoint.cpp maps them."""
    if family == "gpt2":
        if name in ("wte.weight", "wpe.weight") or name.startswith("ln_f."):
            return "transformer." + name, False
        if name == "lm_head.weight":
            return name, False
        _, i, rest = name.split(".", 2)
        conv1d = rest in ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
        return f"transformer.h.{i}.{rest}", conv1d
    fixed = {"tok_embeddings.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight",
             "lm_head.weight": "lm_head.weight"}
    if name in fixed:
        return fixed[name], False
    _, i, rest = name.split(".", 2)
    layer = f"model.layers.{i}."
    if rest == "attn_norm.weight":
        return layer + "input_layernorm.weight", False
    if rest == "mlp_norm.weight":
        return layer + "post_attention_layernorm.weight", False
    if rest.startswith("attn."):
        return layer + "self_attn." + rest[len("attn."):], False
    return layer + rest, False


def build(args):
    config = transformers.AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(args.model)))
    dtype = rt.DTYPES[args.dtype]
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").to(dtype)
    family = config.model_type
    ddx = load_file(args.init)
    names = {}
    state = {}
    for name, t in ddx.items():
        hf, transpose = hf_name(name, family)
        state[hf] = (t.t() if transpose else t).to(dtype).contiguous()
        names[hf] = (name, transpose)
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(state))
    unexpected = sorted(set(state) - set(params))
    if missing or unexpected:
        raise SystemExit(f"{args.init}: weights do not match transformers' model: missing {missing[:6]}, "
                         f"unexpected {unexpected[:6]}")
    with torch.no_grad():
        for hf, p in params.items():
            if p.shape != state[hf].shape:
                raise SystemExit(f"{args.init}: {names[hf][0]} has shape {list(state[hf].shape)}, expected {list(p.shape)}")
            p.copy_(state[hf])
    model.train()
    return model, names


def train(rank, world, args):
    if world != 1:
        raise SystemExit("hf_reference.py runs transformers on one process (--nproc 1)")
    model, names = build(args)
    optimizer = rt.adamw(model, args)
    blocks = rt.global_blocks(rt.read_tokens(args.data), args.seq_length, args.batch_size)
    inputs, labels = blocks[:, :-1].contiguous(), blocks[:, 1:].contiguous()
    args.global_tokens = labels.numel()

    def step_loss():
        # The logits and ddx's cross-entropy (sum over every token, / tokens); transformers' own
        # loss would shift the labels itself and average.
        logits = model(input_ids=inputs).logits
        loss_sum = F.cross_entropy(logits.flatten(0, 1), labels.reshape(-1), reduction="sum")
        (loss_sum * (1.0 / args.global_tokens)).backward()
        sq = sum(p.grad.double().pow(2).sum() for p in model.parameters() if p.grad is not None)
        return loss_sum.item(), float(sq)

    record = rt.train_steps(model, optimizer, args, step_loss)
    record.update(world_size=1, tokens_per_step=args.global_tokens, dtype=args.dtype,
                  transformers=transformers.__version__)
    if args.final_weights:
        out = {}
        for hf, p in model.named_parameters():  # a tied head is one parameter, saved under ddx's name
            name, transpose = names[hf]
            t = p.detach()
            out[name] = (t.t() if transpose else t).contiguous()
        save_file(out, args.final_weights)
    with open(args.out, "w") as f:
        json.dump(record, f)
    print(f"hf_reference: transformers {transformers.__version__}, torch {torch.__version__}: "
          f"{args.steps} steps, last loss {record['losses'][-1]:.8f}", flush=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--write-config":
        if sys.argv[2] not in ("llama", "gpt2"):
            raise SystemExit(f"--write-config {sys.argv[2]}: expected llama or gpt2")
        write_config(sys.argv[2], sys.argv[3])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rt.add_common_args(p)
    p.add_argument("--batch-size", type=int, required=True)
    args = p.parse_args()
    args.nproc = 1
    rt.launch(train, args)


if __name__ == "__main__":
    main()
