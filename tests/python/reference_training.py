"""What the PyTorch reference runs of ddx's strategies share (fsdp2_reference.py, tp_reference.py).

ddx's GPT-2 as nn.Modules whose math comes from reference_models.py (written independently of
the C++ code); ddx's byte-tokenizer data as one global batch of blocks; ddx's learning-rate
schedule, clipping rule and AdamW settings; the per-step record both scripts write; and the
process start (one rank under a launcher's RANK/WORLD_SIZE, or --nproc ranks spawned here).

Each reference only says how it parallelises the model and what one rank computes in a step.

Modules. Linear subclasses nn.Linear (so that PyTorch's tensor-parallel styles accept it) but
computes x @ W^T + b as reference_models.py does; its weight has ddx's layout [out, in]. GPT-2's
fused c_attn is held as three Linears q, k, v (rows 0..d, d..2d, 2d..3d of c_attn): tensor
parallelism must split attention per head, and a column split of each of q, k, v is one. The
weights load from and save to ddx's names (c_attn fused).

Precision: --dtype fp64 (`ddx train --dtype fp64`'s counterpart) builds the model in float64 and
computes everything in it (forward, loss, norms, AdamW's state), so that what differs from ddx
is rounding at float64's epsilon and a real difference stands out by orders of magnitude. The
initial weights may be a float32 file (ddx writes its initialisation in float32): widening them
is exact, and ddx in float64 widens the same float32 values.
"""
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
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_models as ref  # noqa: E402

# ddx's `debug` preset (trainers/models/model_config.cpp), as a Hugging Face GPT-2 config.
DEBUG_CONFIG = {"model_type": "gpt2", "vocab_size": 259, "n_embd": 35, "n_layer": 3, "n_head": 5,
                "n_positions": 131, "n_inner": 137, "layer_norm_epsilon": 1e-5}

# --dtype: the training dtype of `ddx train --dtype`.
DTYPES = {"fp32": torch.float32, "fp64": torch.float64}


# --- model: ddx names and shapes, reference_models.py's math --------------------------------

class Linear(nn.Linear):
    def __init__(self, d_in, d_out, bias=True):
        super().__init__(d_in, d_out, bias=bias)

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


class Attention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.head_dim = d // n_head
        self.q, self.k, self.v = Linear(d, d), Linear(d, d), Linear(d, d)
        self.c_proj = Linear(d, d)

    def forward(self, x):
        # Heads from the width each rank holds: a tensor-parallel rank has n_head / tp of them.
        q, k, v = self.q(x), self.k(x), self.v(x)
        n = q.shape[-1] // self.head_dim
        return self.c_proj(ref.causal_softmax_attention(ref.heads(q, n), ref.heads(k, n), ref.heads(v, n)))


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


class Embeddings(nn.Module):
    """Token plus position embedding: one module, so a parallel plan can place its output."""

    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])

    def forward(self, tokens):
        return self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))


class GPT2(nn.Module):
    """Logits [B, T, vocab]; the head is lm_head, which shares wte's weight when tied."""

    def __init__(self, cfg, tied):
        super().__init__()
        d = cfg["n_embd"]
        self.embed = Embeddings(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"]))
        self.ln_f = LayerNorm(d, cfg.get("layer_norm_epsilon", 1e-5))
        self.lm_head = Linear(d, cfg["vocab_size"], bias=False)
        self.tied = tied
        self.tie()

    def tie(self):
        """Shares wte's weight with the head (again after a parallel plan replaced either)."""
        if self.tied:
            self.lm_head.weight = self.embed.wte.weight

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# Module parameter names <-> ddx's: the embeddings sit in `embed`, c_attn is split in three.
def _ddx_name(name):
    return name[len("embed."):] if name.startswith("embed.") else name


def module_weights(ddx_weights, model):
    """ddx-named weights -> the model's parameter names (c_attn split into q, k, v)."""
    out = {}
    for name, t in ddx_weights.items():
        if name.endswith("attn.c_attn.weight") or name.endswith("attn.c_attn.bias"):
            prefix, kind = name.rsplit(".c_attn.", 1)
            for part, chunk in zip("qkv", t.chunk(3, dim=0)):
                out[f"{prefix}.{part}.{kind}"] = chunk.contiguous()
        elif name in ("wte.weight", "wpe.weight"):
            out["embed." + name] = t
        else:
            out[name] = t
    if model.tied:
        out["lm_head.weight"] = out["embed.wte.weight"]
    return out


def ddx_weights(full):
    """The model's full parameters by module name -> ddx names (q, k, v fused into c_attn)."""
    out = {}
    for name, t in full.items():
        if name == "lm_head.weight" and "embed.wte.weight" in full and t is full["embed.wte.weight"]:
            continue
        prefix, _, kind = name.rpartition(".")
        if prefix.endswith("attn.q"):
            base = prefix[:-len(".q")]
            out[f"{base}.c_attn.{kind}"] = torch.cat([full[f"{base}.{p}.{kind}"] for p in "qkv"]).contiguous()
        elif not (prefix.endswith("attn.k") or prefix.endswith("attn.v")):
            out[_ddx_name(name)] = t.contiguous()
    return out


def hf_to_ddx_names(weights):
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


def build_model(args):
    """ddx's GPT-2 for --model with the weights of --init (ddx or HF names), before any plan."""
    cfg = load_config(args.model)
    dtype = DTYPES[args.dtype]
    weights = hf_to_ddx_names({k: v.to(dtype) for k, v in load_file(args.init).items()})
    # .to() keeps wte and lm_head tied
    model = GPT2(cfg, tied="lm_head.weight" not in weights).to(device=args.device, dtype=dtype)
    weights = module_weights(weights, model)
    params = dict(model.named_parameters(remove_duplicate=False))
    mismatch = set(params) ^ set(weights)
    if mismatch:
        raise SystemExit(f"{args.init}: parameters do not match the model: {sorted(mismatch)[:8]}")
    with torch.no_grad():
        for name, p in params.items():
            if p.shape != weights[name].shape:
                raise SystemExit(f"{args.init}: {name} has shape {list(weights[name].shape)}, expected {list(p.shape)}")
            p.copy_(weights[name])
    return cfg, model


def full_weights(model):
    """The model's full parameters under ddx's names (DTensors gathered: a collective)."""
    full = {name: p.full_tensor().detach() if hasattr(p, "full_tensor") else p.detach()
            for name, p in model.named_parameters(remove_duplicate=False)}
    if model.tied:
        full["lm_head.weight"] = full["embed.wte.weight"]
    return ddx_weights(full)


# --- data ----------------------------------------------------------------------------------

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
    """[global_batch, seq_length + 1]: the data must hold exactly one global batch of blocks, so
    that every step trains on all of them whatever order ddx's sampler shuffles them in."""
    num_blocks = (tokens.numel() - 1) // seq_length
    if num_blocks != global_batch:
        raise SystemExit(f"the data has {num_blocks} blocks of {seq_length + 1} tokens; this reference needs exactly one "
                         f"global batch ({global_batch}) so that every step trains on all of them")
    return torch.stack([tokens[i * seq_length: i * seq_length + seq_length + 1] for i in range(num_blocks)])


# --- optimisation --------------------------------------------------------------------------

def learning_rate(step, peak, warmup, decay):
    """trainers/optim/lr_schedule.cpp: linear warmup, cosine to peak/100 over `decay` steps, flat."""
    if step < warmup:
        return peak * (step + 1) / warmup
    lo = peak * 0.01
    t = step - warmup
    if t >= decay:
        return lo
    return lo + (peak - lo) * 0.5 * (1.0 + math.cos(math.pi * t / decay))


def local_tensor(t):
    return t.to_local() if hasattr(t, "to_local") else t


def adamw(model, args):
    """torch.optim.AdamW as ddx's: betas 0.9/0.999, eps 1e-8, the single-tensor path."""
    return torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=args.weight_decay, foreach=False)


def train_steps(model, optimizer, args, step_loss):
    """args.steps optimizer steps. step_loss() runs one forward and backward and returns the
    global (loss sum over all tokens, squared gradient norm) as floats, the same on every rank.
    Clipping is ddx's (and clip_grad_norm_'s) rule: scale by max / (norm + 1e-6) when < 1."""
    record = {"losses": [], "grad_norms": [], "lrs": [], "step_ms": []}
    for step in range(args.steps):
        lr = learning_rate(step, args.lr, args.warmup_steps, args.lr_decay_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        t0 = time.perf_counter()
        loss_sum, sq = step_loss()
        norm = math.sqrt(sq)
        if args.max_grad_norm > 0 and args.max_grad_norm / (norm + 1e-6) < 1.0:
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        local_tensor(p.grad).mul_(args.max_grad_norm / (norm + 1e-6))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        record["step_ms"].append((time.perf_counter() - t0) * 1e3)
        record["losses"].append(loss_sum / args.global_tokens)
        record["grad_norms"].append(norm)
        record["lrs"].append(lr)
        if dist.get_rank() == 0 and args.verbose:
            print(f"step {step + 1} loss {record['losses'][-1]:.8f} grad_norm {norm:.6f} lr {lr:.6g}", flush=True)
    return record


def write_results(model, args, record):
    """Rank 0 writes the JSON record (and --final-weights); every rank joins the gather."""
    full = full_weights(model) if args.final_weights else None
    if dist.get_rank() != 0:
        return
    if full is not None:
        save_file(full, args.final_weights)
    record.update(world_size=dist.get_world_size(), tokens_per_step=args.global_tokens, dtype=args.dtype)
    with open(args.out, "w") as f:
        json.dump(record, f)


# --- command line and processes ------------------------------------------------------------

def add_common_args(p):
    p.add_argument("--data", required=True, help="plain text file (byte tokenizer) or a ddx token cache (*.ddxtok)")
    p.add_argument("--init", required=True, help="initial weights (safetensors, ddx or HF GPT-2 names)")
    p.add_argument("--model", default="debug", help="debug, or a GPT-2 config.json (or its folder)")
    p.add_argument("--seq-length", type=int, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--lr-decay-steps", type=int, default=1000)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--max-grad-norm", type=float, default=0.0, help="clip the global gradient norm (0: off)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32",
                   help="training dtype (ddx's --dtype): fp64 tells a difference from rounding")
    p.add_argument("--nproc", type=int, default=2, help="ranks to spawn when not started by a launcher")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--out", required=True, help="JSON file for the per-step losses")
    p.add_argument("--final-weights", help="write the final full parameters (safetensors, ddx names)")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the model and batches on this rank's GPU, NCCL for CUDA tensors (the GPU check)")


def _run(train, rank, world, args):
    if args.device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("cpu:gloo,cuda:nccl" if args.device == "cuda" else "gloo", rank=rank, world_size=world)
    try:
        torch.set_num_threads(args.threads)
        torch.manual_seed(0)
        train(rank, world, args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _worker(rank, train, world, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    _run(train, rank, world, args)
    # The work is done and written (every rank passed the barrier). Leave without the
    # interpreter's teardown: a spawned rank of PyTorch's pipelining once died there with
    # "terminate called without an active exception" (a Gloo thread still joinable when C++
    # statics were destroyed), SIGABRT after a complete run (1 in ~15 CI runs).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def launch(train, args):
    """train(rank, world, args) on every rank of a Gloo group: this process's rank under a
    launcher (RANK and WORLD_SIZE set), else args.nproc spawned ranks on 127.0.0.1."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        _run(train, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_worker, args=(train, args.nproc, port, args), nprocs=args.nproc, join=True,
                       start_method="spawn")
