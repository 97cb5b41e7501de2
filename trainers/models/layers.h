#pragma once
// Small building blocks shared by gpt2.cpp and llama.cpp; the linear layers (split or not under
// tensor parallelism) are in parallel_layers.h. Parameters are created
// uninitialised (torch::empty): build_model() fills every one through init_parameter(), so the
// default Kaiming init of torch::nn::Linear would be wasted work on an 8B model.
#include <torch/torch.h>

#include <memory>

#include "models/causal_lm.h"

namespace ddx::models::detail {

// A parameter of `shape`: uninitialised, or, inside a SkeletonScope, with its full sizes but
// no storage at all (see build_model_skeleton()).
torch::Tensor new_parameter(at::IntArrayRef shape, const torch::TensorOptions& options);
class SkeletonScope {
 public:
  SkeletonScope();
  ~SkeletonScope();
  SkeletonScope(const SkeletonScope&) = delete;
  SkeletonScope& operator=(const SkeletonScope&) = delete;

 private:
  bool previous_;
};

// The two uses of a tied embedding weight in one autograd graph (TiedGradient in
// causal_lm.h): torch::embedding(weight, ids) and torch::linear(hidden, weight), the same
// values and, bit for bit, the same summed gradient. The head's backward computes linear's own
// product for the weight (the same call, so the same bits) and leaves it in `tied`; the
// lookup's backward sums each used row's gradients with embedding_dense_backward itself over a
// table of only those rows (so in the same order) and adds them into the product in place:
// product + rows, the same bits as the plain rows + product. If the lookup is not in the graph
// the head returns its product as usual, and a lookup that finds no product returns the plain
// whole table. On a GPU the fill and the add take microseconds: there both are the plain ops.
torch::Tensor tied_embedding(const torch::Tensor& weight, const torch::Tensor& ids, const TiedGradientPtr& tied);
torch::Tensor tied_head(const torch::Tensor& hidden, const torch::Tensor& weight, const TiedGradientPtr& tied);

struct Embedding : torch::nn::Module {
  Embedding(int64_t rows, int64_t dim, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& ids) const;
  torch::Tensor weight;
};

struct LayerNorm : torch::nn::Module {
  LayerNorm(int64_t dim, double eps, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight, bias;
  double eps;
};

// RMSNorm as HF Llama computes it: statistics in float32, normalised activations cast back to
// the input dtype before the weight multiplies them.
struct RmsNorm : torch::nn::Module {
  RmsNorm(int64_t dim, double eps, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight;
  double eps;
};

// Causal self-attention on [B, H, T, hd] heads; key/value heads are shared by groups of
// H / KV consecutive query heads (HF repeat_kv order). Returns [B, T, H*hd].
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// [B, T, H*hd] -> [B, H, T, hd]
torch::Tensor split_heads(const torch::Tensor& x, int64_t heads);

// Rotary embedding tables for positions [0, T): cos and sin of shape [T, head_dim] in float32,
// each frequency repeated in both halves (HF's rotate_half layout), llama3 scaling applied.
struct RopeTables {
  torch::Tensor cos, sin;
};
RopeTables rope_tables(const ModelConfig& config, int64_t seq_len, const torch::Device& device);
// Applies RoPE to [B, H, T, hd] in the rotate_half convention: x*cos + rotate_half(x)*sin,
// rotate_half(x) = cat(-x2, x1) over the two halves of the head dim. This is the layout of
// HF Llama's q_proj/k_proj weights, so HF checkpoints load unpermuted.
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables);

// Family constructors, used by build_model().
std::shared_ptr<CausalLM> make_gpt2(const ModelConfig& config, const TensorParallel& tp,
                                    const torch::TensorOptions& options);
std::shared_ptr<CausalLM> make_llama(const ModelConfig& config, const TensorParallel& tp,
                                     const torch::TensorOptions& options);

}  // namespace ddx::models::detail
