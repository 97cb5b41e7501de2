// Llama 3 (Grattafiori et al. 2024), as HF LlamaForCausalLM computes it:
//
//   h = tok_embeddings[tokens]
//   for each block:
//     x = attn_norm(h)                                   (RMSNorm)
//     q, k = rope(q_proj(x)), rope(k_proj(x)); v = v_proj(x)   (KV heads shared by groups)
//     h = h + o_proj(causal_attention(q, k, v))
//     x = mlp_norm(h)
//     h = h + down_proj(silu(gate_proj(x)) * up_proj(x))  (SwiGLU)
//   logits = lm_head(norm(h))        (or tok_embeddings^T when tie_embeddings)
//
// Parameter names (named_parameters()):
//   tok_embeddings.weight [V, D],
//   blocks.{i}.attn_norm.weight [D],
//   blocks.{i}.attn.{q_proj [H*hd, D], k_proj [KV*hd, D], v_proj [KV*hd, D], o_proj [D, D]}.weight,
//   blocks.{i}.mlp_norm.weight [D],
//   blocks.{i}.mlp.{gate_proj [I, D], up_proj [I, D], down_proj [D, I]}.weight,
//   norm.weight [D], lm_head.weight [V, D] (untied only).
// RoPE uses HF's rotate_half layout (see layers.h), so HF q/k weights load as they are.
//
// Tensor parallelism over N ranks (parallel_layers.h): rank r holds query heads
// [r H/N, (r+1) H/N) and KV heads [r KV/N, (r+1) KV/N) (GQA groups stay whole: local query head
// j reads local KV head j / (H/KV), as globally), the matching input columns of o_proj, a 1/N
// slice of gate/up rows and down columns, and a 1/N slice of the vocabulary rows of
// tok_embeddings and lm_head. The norms are replicated.
#include "models/layers.h"
#include "models/parallel_layers.h"

namespace ddx::models::detail {
namespace {

struct LlamaAttention : torch::nn::Module {
  LlamaAttention(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o)
      : heads(c.num_heads / tp.size()), kv_heads(c.num_kv_heads / tp.size()) {
    const int64_t d = c.hidden_size, hd = c.head_dim(), r = tp.rank();
    const Range q_rows{r * heads * hd, (r + 1) * heads * hd}, kv_rows{r * kv_heads * hd, (r + 1) * kv_heads * hd};
    const int64_t q_out = c.num_heads * hd, kv_out = c.num_kv_heads * hd;
    q_proj = register_module("q_proj", std::make_shared<ColumnParallelLinear>(d, q_out, std::vector<Range>{q_rows}, false, tp, o));
    k_proj = register_module("k_proj", std::make_shared<ColumnParallelLinear>(d, kv_out, std::vector<Range>{kv_rows}, false, tp, o));
    v_proj = register_module("v_proj", std::make_shared<ColumnParallelLinear>(d, kv_out, std::vector<Range>{kv_rows}, false, tp, o));
    o_proj = register_module("o_proj", std::make_shared<RowParallelLinear>(q_out, d, q_rows, false, tp, o));
  }
  torch::Tensor forward(const torch::Tensor& region_input, const RopeTables& rope) {
    RECORD_USER_SCOPE("ddx::attention");
    torch::Tensor x = enter_tp_region(region_input, q_proj->tp);
    torch::Tensor q = apply_rope(split_heads(q_proj->forward(x), heads), rope);
    torch::Tensor k = apply_rope(split_heads(k_proj->forward(x), kv_heads), rope);
    torch::Tensor v = split_heads(v_proj->forward(x), kv_heads);
    return o_proj->forward(causal_attention(q, k, v));
  }
  int64_t heads, kv_heads;  // on this rank
  std::shared_ptr<ColumnParallelLinear> q_proj, k_proj, v_proj;
  std::shared_ptr<RowParallelLinear> o_proj;
};

struct LlamaMlp : torch::nn::Module {
  LlamaMlp(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o) {
    const int64_t d = c.hidden_size, i = c.intermediate_size;
    const Range mine = shard_range(i, tp.size(), tp.rank(), "an MLP width");
    gate_proj = register_module("gate_proj", std::make_shared<ColumnParallelLinear>(d, i, std::vector<Range>{mine}, false, tp, o));
    up_proj = register_module("up_proj", std::make_shared<ColumnParallelLinear>(d, i, std::vector<Range>{mine}, false, tp, o));
    down_proj = register_module("down_proj", std::make_shared<RowParallelLinear>(i, d, mine, false, tp, o));
  }
  torch::Tensor forward(const torch::Tensor& region_input) {
    RECORD_USER_SCOPE("ddx::mlp");
    torch::Tensor x = enter_tp_region(region_input, gate_proj->tp);
    return down_proj->forward(torch::silu(gate_proj->forward(x)) * up_proj->forward(x));
  }
  std::shared_ptr<ColumnParallelLinear> gate_proj, up_proj;
  std::shared_ptr<RowParallelLinear> down_proj;
};

struct LlamaBlock : torch::nn::Module {
  LlamaBlock(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o) {
    attn_norm = register_module("attn_norm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, o));
    attn = register_module("attn", std::make_shared<LlamaAttention>(c, tp, o));
    mlp_norm = register_module("mlp_norm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, o));
    mlp = register_module("mlp", std::make_shared<LlamaMlp>(c, tp, o));
  }
  torch::Tensor forward(torch::Tensor h, const RopeTables& rope) {
    RECORD_USER_SCOPE("ddx::block");
    h = h + attn->forward(attn_norm->forward(h), rope);
    return h + mlp->forward(mlp_norm->forward(h));
  }
  std::shared_ptr<RmsNorm> attn_norm, mlp_norm;
  std::shared_ptr<LlamaAttention> attn;
  std::shared_ptr<LlamaMlp> mlp;
};

// block_module(i) hands strategies the block itself; its forward needs the RoPE tables, which
// the model computes once per sequence length and device.
class Llama : public CausalLM {
 public:
  Llama(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o) : CausalLM(c, tp) {
    tok_embeddings = register_module("tok_embeddings",
                                     std::make_shared<VocabParallelEmbedding>(c.vocab_size, c.hidden_size, tp, o));
    auto list = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_layers; ++i) {
      blocks.push_back(std::make_shared<LlamaBlock>(c, tp, o));
      list->push_back(blocks.back());
    }
    norm = register_module("norm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, o));
    if (!c.tie_embeddings)
      lm_head = register_module("lm_head", std::make_shared<ColumnParallelLinear>(
                                               c.hidden_size, c.vocab_size, std::vector<Range>{tok_embeddings->rows}, false, tp, o));
  }

  torch::Tensor embed(const torch::Tensor& tokens, const TiedGradientPtr& tied) override {
    TORCH_CHECK(tokens.size(1) <= config().max_position_embeddings, "sequence length ", tokens.size(1),
                " exceeds max_position_embeddings ", config().max_position_embeddings);
    RECORD_USER_SCOPE("ddx::embedding");
    return tok_embeddings->forward(tokens, lm_head ? TiedGradientPtr() : tied);
  }

  torch::Tensor block(int64_t i, const torch::Tensor& hidden) override {
    // Attention runs on the whole sequence, also when the block's input is a sequence shard.
    const int64_t seq = hidden.size(1) * (tensor_parallel().sequence_parallel ? tensor_parallel().size() : 1);
    return blocks.at(i)->forward(hidden, rope_for(seq, hidden.device()));
  }

  torch::Tensor head(const torch::Tensor& hidden, const TiedGradientPtr& tied) override {
    RECORD_USER_SCOPE("ddx::head");
    const torch::Tensor h = enter_tp_region(norm->forward(hidden), tensor_parallel());
    return lm_head ? torch::linear(h, lm_head->weight) : tok_embeddings->logits(h, tied);
  }

  std::shared_ptr<torch::nn::Module> block_module(int64_t i) override { return blocks.at(i); }
  std::vector<std::string> embedding_parameter_names() const override { return {"tok_embeddings.weight"}; }
  std::vector<std::string> tied_parameter_names() const override {
    return lm_head ? std::vector<std::string>{} : std::vector<std::string>{"tok_embeddings.weight"};
  }
  std::vector<std::string> head_parameter_names() const override {
    std::vector<std::string> names = {"norm.weight"};
    if (lm_head) names.push_back("lm_head.weight");
    return names;
  }

 private:
  // The tables are constants (no autograd history), so caching them is safe; tables made under
  // InferenceMode cannot be saved for backward, so those are remade outside it.
  const RopeTables& rope_for(int64_t seq_len, const torch::Device& device) {
    if (!rope_.cos.defined() || rope_.cos.size(0) != seq_len || rope_.cos.device() != device ||
        (rope_.cos.is_inference() && !c10::InferenceMode::is_enabled()))
      rope_ = rope_tables(config(), seq_len, device);
    return rope_;
  }

  std::shared_ptr<VocabParallelEmbedding> tok_embeddings;
  std::vector<std::shared_ptr<LlamaBlock>> blocks;
  std::shared_ptr<RmsNorm> norm;
  std::shared_ptr<ColumnParallelLinear> lm_head;
  RopeTables rope_;
};

}  // namespace

std::shared_ptr<CausalLM> make_llama(const ModelConfig& config, const TensorParallel& tp,
                                     const torch::TensorOptions& options) {
  return std::make_shared<Llama>(config, tp, options);
}

}  // namespace ddx::models::detail
