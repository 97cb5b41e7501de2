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
#include "models/layers.h"

namespace ddx::models::detail {
namespace {

struct Gpt2Attention : torch::nn::Module {
  Gpt2Attention(const ModelConfig& c, const torch::TensorOptions& o) : heads(c.num_heads) {
    c_attn = register_module("c_attn", std::make_shared<Linear>(c.hidden_size, 3 * c.hidden_size, true, o));
    c_proj = register_module("c_proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    std::vector<torch::Tensor> qkv = c_attn->forward(x).chunk(3, /*dim=*/-1);
    torch::Tensor y = causal_attention(split_heads(qkv[0], heads), split_heads(qkv[1], heads),
                                       split_heads(qkv[2], heads));
    return c_proj->forward(y);
  }
  int64_t heads;
  std::shared_ptr<Linear> c_attn, c_proj;
};

struct Gpt2Mlp : torch::nn::Module {
  Gpt2Mlp(const ModelConfig& c, const torch::TensorOptions& o) {
    c_fc = register_module("c_fc", std::make_shared<Linear>(c.hidden_size, c.intermediate_size, true, o));
    c_proj = register_module("c_proj", std::make_shared<Linear>(c.intermediate_size, c.hidden_size, true, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    // HF "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    return c_proj->forward(torch::gelu(c_fc->forward(x), "tanh"));
  }
  std::shared_ptr<Linear> c_fc, c_proj;
};

struct Gpt2Block : torch::nn::Module {
  Gpt2Block(const ModelConfig& c, const torch::TensorOptions& o) {
    ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps, o));
    attn = register_module("attn", std::make_shared<Gpt2Attention>(c, o));
    ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps, o));
    mlp = register_module("mlp", std::make_shared<Gpt2Mlp>(c, o));
  }
  torch::Tensor forward(torch::Tensor h) {
    h = h + attn->forward(ln_1->forward(h));
    return h + mlp->forward(ln_2->forward(h));
  }
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<Gpt2Attention> attn;
  std::shared_ptr<Gpt2Mlp> mlp;
};

class Gpt2 : public CausalLM {
 public:
  Gpt2(const ModelConfig& c, const torch::TensorOptions& o) : CausalLM(c) {
    wte = register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    wpe = register_module("wpe", std::make_shared<Embedding>(c.max_position_embeddings, c.hidden_size, o));
    auto list = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_layers; ++i) {
      blocks.push_back(std::make_shared<Gpt2Block>(c, o));
      list->push_back(blocks.back());
    }
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps, o));
    if (!c.tie_embeddings)
      lm_head = register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
  }

  torch::Tensor embed(const torch::Tensor& tokens) override {
    const int64_t t = tokens.size(1);
    TORCH_CHECK(t <= config().max_position_embeddings, "sequence length ", t,
                " exceeds max_position_embeddings ", config().max_position_embeddings);
    torch::Tensor positions = torch::arange(t, tokens.options().dtype(torch::kInt64));
    return wte->forward(tokens) + wpe->forward(positions);
  }

  torch::Tensor block(int64_t i, const torch::Tensor& hidden) override { return blocks.at(i)->forward(hidden); }

  torch::Tensor head(const torch::Tensor& hidden) override {
    torch::Tensor h = ln_f->forward(hidden);
    return torch::linear(h, lm_head ? lm_head->weight : wte->weight);
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
  std::shared_ptr<Embedding> wte, wpe;
  std::vector<std::shared_ptr<Gpt2Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;
};

}  // namespace

std::shared_ptr<CausalLM> make_gpt2(const ModelConfig& config, const torch::TensorOptions& options) {
  return std::make_shared<Gpt2>(config, options);
}

}  // namespace ddx::models::detail
