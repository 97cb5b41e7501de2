// GPT-2 (Radford et al. 2019), as HF GPT2LMHeadModel computes it, minus dropout:
//
//   h = wte[tokens] + wpe[0..T)
//   for each block:
//     h = h + attn.c_proj(causal_attention(split(attn.c_attn(ln_1(h)))))
//     h = h + mlp.c_proj(gelu_tanh(mlp.c_fc(ln_2(h))))
//   logits = ln_f(h) @ wte^T          (tied; lm_head.weight when untied)
//
// Parameter names (named_parameters()):
//   wte.weight [V, D], wpe.weight [P, D], lm_head.weight [V, D] (untied only),
//   blocks.{i}.ln_1.{weight,bias} [D], blocks.{i}.attn.c_attn.{weight [3D, D], bias [3D]},
//   blocks.{i}.attn.c_proj.{weight [D, D], bias}, blocks.{i}.ln_2.{weight,bias},
//   blocks.{i}.mlp.c_fc.{weight [I, D], bias [I]}, blocks.{i}.mlp.c_proj.{weight [D, I], bias},
//   ln_f.{weight,bias}.
// Weights are in Linear layout [out, in]; HF stores these Conv1D weights as [in, out].
//
// Tensor parallelism over N ranks (parallel_layers.h): rank r holds heads [r H/N, (r+1) H/N)
// of c_attn's q, k and v (three row ranges of the fused weight, so the local chunk(3) still
// yields q, k, v) and the matching input columns of attn.c_proj; a 1/N slice of mlp.c_fc's
// rows and mlp.c_proj's columns; and a 1/N slice of the vocabulary rows of wte (and of the
// tied head's logits). wpe, the norms and the row-parallel biases are replicated.
//
// Each layer kind records a ddx:: profiler scope (ddx train --profile, docs/performance.md).
#include "models/layers.h"
#include "models/parallel_layers.h"

namespace ddx::models::detail {
namespace {

struct Gpt2Attention : torch::nn::Module {
  Gpt2Attention(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o)
      : heads(c.num_heads / tp.size()) {
    const int64_t d = c.hidden_size;
    const Range mine{tp.rank() * heads * c.head_dim(), (tp.rank() + 1) * heads * c.head_dim()};
    const std::vector<Range> qkv = {mine, {d + mine.begin, d + mine.end}, {2 * d + mine.begin, 2 * d + mine.end}};
    c_attn = register_module("c_attn", std::make_shared<ColumnParallelLinear>(d, 3 * d, qkv, true, tp, o));
    c_proj = register_module("c_proj", std::make_shared<RowParallelLinear>(d, d, mine, true, tp, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    RECORD_USER_SCOPE("ddx::attention");
    std::vector<torch::Tensor> qkv = c_attn->forward(enter_tp_region(x, c_attn->tp)).chunk(3, /*dim=*/-1);
    torch::Tensor y = causal_attention(split_heads(qkv[0], heads), split_heads(qkv[1], heads),
                                       split_heads(qkv[2], heads));
    return c_proj->forward(y);
  }
  int64_t heads;  // on this rank
  std::shared_ptr<ColumnParallelLinear> c_attn;
  std::shared_ptr<RowParallelLinear> c_proj;
};

struct Gpt2Mlp : torch::nn::Module {
  Gpt2Mlp(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o) {
    const Range mine = shard_range(c.intermediate_size, tp.size(), tp.rank(), "an MLP width");
    c_fc = register_module("c_fc", std::make_shared<ColumnParallelLinear>(c.hidden_size, c.intermediate_size,
                                                                         std::vector<Range>{mine}, true, tp, o));
    c_proj = register_module("c_proj", std::make_shared<RowParallelLinear>(c.intermediate_size, c.hidden_size, mine,
                                                                          true, tp, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    // HF "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    RECORD_USER_SCOPE("ddx::mlp");
    return c_proj->forward(torch::gelu(c_fc->forward(enter_tp_region(x, c_fc->tp)), "tanh"));
  }
  std::shared_ptr<ColumnParallelLinear> c_fc;
  std::shared_ptr<RowParallelLinear> c_proj;
};

struct Gpt2Block : torch::nn::Module {
  Gpt2Block(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o) {
    ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps, o));
    attn = register_module("attn", std::make_shared<Gpt2Attention>(c, tp, o));
    ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps, o));
    mlp = register_module("mlp", std::make_shared<Gpt2Mlp>(c, tp, o));
  }
  torch::Tensor forward(torch::Tensor h) {
    RECORD_USER_SCOPE("ddx::block");
    h = h + attn->forward(ln_1->forward(h));
    return h + mlp->forward(ln_2->forward(h));
  }
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<Gpt2Attention> attn;
  std::shared_ptr<Gpt2Mlp> mlp;
};

class Gpt2 : public CausalLM {
 public:
  Gpt2(const ModelConfig& c, const TensorParallel& tp, const torch::TensorOptions& o) : CausalLM(c, tp) {
    wte = register_module("wte", std::make_shared<VocabParallelEmbedding>(c.vocab_size, c.hidden_size, tp, o));
    wpe = register_module("wpe", std::make_shared<Embedding>(c.max_position_embeddings, c.hidden_size, o));
    auto list = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_layers; ++i) {
      blocks.push_back(std::make_shared<Gpt2Block>(c, tp, o));
      list->push_back(blocks.back());
    }
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps, o));
    if (!c.tie_embeddings)
      lm_head = register_module("lm_head", std::make_shared<ColumnParallelLinear>(
                                               c.hidden_size, c.vocab_size, std::vector<Range>{wte->rows}, false, tp, o));
  }

  torch::Tensor embed(const torch::Tensor& tokens, const TiedGradientPtr& tied) override {
    const int64_t t = tokens.size(1);
    TORCH_CHECK(t <= config().max_position_embeddings, "sequence length ", t,
                " exceeds max_position_embeddings ", config().max_position_embeddings);
    // Under sequence parallelism wte's output is this rank's sequence slice: add its positions.
    const Range seq = sequence_range(t, tensor_parallel());
    RECORD_USER_SCOPE("ddx::embedding");
    torch::Tensor positions = torch::arange(seq.begin, seq.end, tokens.options().dtype(torch::kInt64));
    return wte->forward(tokens, lm_head ? TiedGradientPtr() : tied) + wpe->forward(positions);
  }

  torch::Tensor block(int64_t i, const torch::Tensor& hidden) override { return blocks.at(i)->forward(hidden); }

  torch::Tensor head(const torch::Tensor& hidden, const TiedGradientPtr& tied) override {
    RECORD_USER_SCOPE("ddx::head");
    const torch::Tensor h = enter_tp_region(ln_f->forward(hidden), tensor_parallel());
    return lm_head ? torch::linear(h, lm_head->weight) : wte->logits(h, tied);
  }

  std::shared_ptr<torch::nn::Module> block_module(int64_t i) override { return blocks.at(i); }
  std::vector<std::string> embedding_parameter_names() const override { return {"wte.weight", "wpe.weight"}; }
  std::vector<std::string> tied_parameter_names() const override {
    return lm_head ? std::vector<std::string>{} : std::vector<std::string>{"wte.weight"};
  }
  std::vector<std::string> head_parameter_names() const override {
    std::vector<std::string> names = {"ln_f.weight", "ln_f.bias"};
    if (lm_head) names.push_back("lm_head.weight");
    return names;
  }

 private:
  std::shared_ptr<VocabParallelEmbedding> wte;
  std::shared_ptr<Embedding> wpe;
  std::vector<std::shared_ptr<Gpt2Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<ColumnParallelLinear> lm_head;
};

}  // namespace

std::shared_ptr<CausalLM> make_gpt2(const ModelConfig& config, const TensorParallel& tp,
                                    const torch::TensorOptions& options) {
  return std::make_shared<Gpt2>(config, tp, options);
}

}  // namespace ddx::models::detail
