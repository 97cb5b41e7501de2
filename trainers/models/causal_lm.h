#pragma once
// The model interface every strategy builds on. A model is split into units the strategies
// schedule: the embedding, N transformer blocks, and the head (final norm + LM head). forward()
// composes them; strategies that interpose around units (FSDP all-gathers, activation
// checkpointing, pipeline stages) call embed/block/head themselves.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/tensor_parallel.h"

namespace ddx::models {

struct LossSum;

// A tied embedding weight (the LM head's too) gets two gradients: the lookup's, a [V, D] table
// that is zero but for the rows used, and the head's, a [V, D] matrix product. Summed the plain
// way that is a 154 MB zero-fill and a 154 MB out-of-place add per GPT-2 step (~0.4 s of 3 s
// on a CPU; PyTorch eager pays the same). When the lookup and the head run in one autograd
// graph, the head's backward leaves its product here and the lookup's backward adds the rows
// it used into it in place, which becomes the weight's one gradient (tied_embedding() and
// tied_head() in layers.h). Strategies that run units apart (FSDP, pipeline stages) pass none.
struct TiedGradient : torch::CustomClassHolder {
  bool lookup_in_graph = false;  // the lookup will take head_product (so the head may leave it)
  torch::Tensor head_product;
};
using TiedGradientPtr = c10::intrusive_ptr<TiedGradient>;

class CausalLM : public torch::nn::Module {
 public:
  CausalLM(ModelConfig config, TensorParallel tp) : config_(std::move(config)), tp_(tp) {}
  const ModelConfig& config() const { return config_; }
  // The tensor-parallel split this model was built with (none: every parameter is full).
  const TensorParallel& tensor_parallel() const { return tp_; }

  // `tied`: given (forward() gives one per call) when embed() and head() run in one autograd
  // graph, so a tied embedding weight's two gradients can be summed in place (TiedGradient).
  // tokens [B, T] int64 -> hidden [B, T, D]
  virtual torch::Tensor embed(const torch::Tensor& tokens, const TiedGradientPtr& tied = {}) = 0;
  // One transformer block, i in [0, num_layers).
  virtual torch::Tensor block(int64_t i, const torch::Tensor& hidden) = 0;
  // hidden [B, T, D] -> logits [B, T, V] (under tensor parallelism: this rank's vocabulary
  // slice [B, T, V/N]; never the full logits)
  virtual torch::Tensor head(const torch::Tensor& hidden, const TiedGradientPtr& tied = {}) = 0;
  // The summed token loss of head()'s logits: causal_lm_loss_sum(), or its vocab-parallel form.
  LossSum loss_sum(const torch::Tensor& logits, const torch::Tensor& labels) const;

  torch::Tensor forward(const torch::Tensor& tokens) {
    const auto tied = c10::make_intrusive<TiedGradient>();
    torch::Tensor h = embed(tokens, tied);
    for (int64_t i = 0; i < config_.num_layers; ++i) h = block(i, h);
    return head(h, tied);
  }

  // The module of block i, and of the embedding and head units, for strategies that shard or
  // wrap per unit. Parameter names are those of named_parameters() on the whole model.
  virtual std::shared_ptr<torch::nn::Module> block_module(int64_t i) = 0;
  virtual std::vector<std::string> embedding_parameter_names() const = 0;
  virtual std::vector<std::string> head_parameter_names() const = 0;
  // Parameters more than one unit uses (the embedding of a tied head): a strategy that
  // schedules units must keep them available from the first unit's forward to the last
  // unit's backward. They are also listed in embedding_parameter_names().
  virtual std::vector<std::string> tied_parameter_names() const { return {}; }

 private:
  ModelConfig config_;
  TensorParallel tp_;
};

// Builds the model with every parameter initialised by init_parameter() (so identical for any
// parallel layout), on `device` in `dtype`. Under tensor parallelism (`tp` with a group) each
// rank builds only its slices (parallel_layers.h), bit-identical to the same slices of the
// single-device model.
std::shared_ptr<CausalLM> build_model(const ModelConfig& config, uint64_t seed,
                                      torch::Device device = torch::kCPU,
                                      torch::Dtype dtype = torch::kFloat32, const TensorParallel& tp = {});

// The module structure with every parameter at its full shape but without storage: nothing
// is allocated or initialised. For sharded strategies, which attach storage themselves
// (FSDP points each unit's parameters at its gathered buffer only while the unit runs).
// Reading a parameter of a skeleton before that is undefined.
std::shared_ptr<CausalLM> build_model_skeleton(const ModelConfig& config, torch::Device device,
                                               torch::Dtype dtype);

// Layout-independent initialisation: rows [row_begin, row_end) along dim 0 of the parameter
// called `name` (a named_parameters() name) with full shape `full_shape`, as build_model()
// would initialise them. Each row comes from its own seed (seed, name, row), so a rank holding
// a shard creates exactly its slice of the single-device weights without the full tensor.
// Float32 on CPU.
torch::Tensor init_parameter(const ModelConfig& config, const std::string& name,
                             const std::vector<int64_t>& full_shape, uint64_t seed,
                             int64_t row_begin, int64_t row_end);

// Sum of token cross-entropy over labels != -100 (reduction "sum", in float32 even for bf16
// logits), and the number of such tokens. labels[b, t] is the target of position t, i.e.
// already shifted (the data pipeline's labels = block[1:T+1]); nothing is shifted here. The trainer divides by the GLOBAL token count of the
// step (see parallelism.md §1), never by a per-rank mean.
struct LossSum {
  torch::Tensor sum;  // scalar
  int64_t tokens = 0;
};
LossSum causal_lm_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels);

}  // namespace ddx::models
