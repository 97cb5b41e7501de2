#pragma once
// Tensor-parallel building blocks (Megatron layout, parallelism.md §4), beside the plain layers
// of layers.h. A TP group of N ranks splits each block's matrices: column-parallel layers hold
// a slice of the output features (q/k/v heads, MLP up/gate/c_fc, the LM head's vocabulary),
// row-parallel layers the matching slice of the input features (attention output, MLP
// down/c_proj). Between blocks the activations are the full hidden size, replicated on every
// TP rank or, with sequence parallelism (SP), split along the sequence.
//
// The conjugate operators are autograd functions whose collectives go through ddx's collective
// layer, so the flight recorder, --check-collectives and tests see every one:
//
//   operator           forward                      backward              where
//   copy_to_tp      f  identity                     all-reduce            column-parallel input
//   reduce_from_tp  g  all-reduce                   identity              row-parallel output
//   gather_sequence    all-gather along sequence    reduce-scatter        column input under SP
//   scatter_sequence   reduce-scatter along seq.    all-gather            row output under SP
//
// Without a group, or with a group of one rank, every operator is the identity and every layer
// computes exactly what its plain counterpart does, so the TP model at N = 1 is the plain model.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "models/causal_lm.h"
#include "models/tensor_parallel.h"

namespace ddx::models {

// A module holding sharded parameters: their shards by local parameter name ("weight").
struct ShardedModule {
  virtual ~ShardedModule() = default;
  virtual ParameterShards shards() const = 0;
};

// Every sharded parameter of `model` by its named_parameters() name.
ParameterShards parameter_shards(torch::nn::Module& model);

torch::Tensor copy_to_tp(const torch::Tensor& x, const TensorParallel& tp);
torch::Tensor reduce_from_tp(const torch::Tensor& x, const TensorParallel& tp);
// [B, T/N, ...] -> [B, T, ...] and back (the sequence is dim 1).
torch::Tensor gather_sequence(const torch::Tensor& x, const TensorParallel& tp);
torch::Tensor scatter_sequence(const torch::Tensor& x, const TensorParallel& tp);

// Positions [0, seq_len) of the full sequence that this rank's activations hold: all of them,
// or under SP this rank's contiguous 1/N (seq_len must divide evenly).
Range sequence_range(int64_t seq_len, const TensorParallel& tp);

// The two ends of a tensor-parallel region (an attention or an MLP, or the LM head): the input
// becomes the full activations every rank needs (copy_to_tp, or gather_sequence under SP), and
// the row-parallel output's partial sums are reduced (reduce_from_tp, or scatter_sequence). A
// region enters once however many column-parallel layers read its input (q, k and v), so a
// block issues one collective per region each way.
torch::Tensor enter_tp_region(const torch::Tensor& x, const TensorParallel& tp);
torch::Tensor leave_tp_region(const torch::Tensor& partial, const TensorParallel& tp);

// Output features `ranges` (concatenated, global indices) of y = x W^T (+ b), W of shape
// [out, in] (the torch Linear layout, also used for GPT-2's Conv1D weights, which the HF
// mapping transposes). Unsplit, it is the plain linear layer. The input is the region's input
// after enter_tp_region(); no communication here.
struct ColumnParallelLinear : torch::nn::Module, ShardedModule {
  ColumnParallelLinear(int64_t in, int64_t out, std::vector<Range> ranges, bool bias, const TensorParallel& tp,
                       const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x) const { return torch::linear(x, weight, bias); }
  ParameterShards shards() const override;
  torch::Tensor weight, bias;
  int64_t in, out;
  std::vector<Range> ranges;
  TensorParallel tp;
};

// Input features `in_range` of the same y = x W^T (+ b); the input is this rank's slice of features.
// The partial products are summed (leave_tp_region) and the bias, replicated, is added after
// the sum.
struct RowParallelLinear : torch::nn::Module, ShardedModule {
  RowParallelLinear(int64_t in, int64_t out, Range in_range, bool bias, const TensorParallel& tp,
                    const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x) const;
  ParameterShards shards() const override;
  torch::Tensor weight, bias;
  int64_t in, out;
  Range in_range;
  TensorParallel tp;
};

// Rows shard_range(vocab) of the embedding. Ids outside them look up row 0 and are zeroed; the
// partial embeddings are summed (one all-reduce, or a reduce-scatter to sequence shards under SP).
struct VocabParallelEmbedding : torch::nn::Module, ShardedModule {
  VocabParallelEmbedding(int64_t vocab, int64_t dim, const TensorParallel& tp, const torch::TensorOptions& options);
  // `tied`: the lookup and the head (logits()) run in one autograd graph (TiedGradient).
  torch::Tensor forward(const torch::Tensor& ids, const TiedGradientPtr& tied = {}) const;
  // The tied LM head: hidden @ weight^T, this rank's vocabulary slice of the logits.
  torch::Tensor logits(const torch::Tensor& hidden, const TiedGradientPtr& tied) const;
  ParameterShards shards() const override;
  torch::Tensor weight;
  int64_t vocab, dim;
  Range rows;
  TensorParallel tp;
};

// build_model_skeleton() of a tensor-parallel model: every parameter at its slice's shape
// (2D shards each slice with FSDP).
std::shared_ptr<CausalLM> build_model_skeleton(const ModelConfig& config, torch::Device device, torch::Dtype dtype,
                                               const TensorParallel& tp);

// causal_lm_loss_sum() from this rank's vocabulary slice `vocab` of the logits [B, T, V/N],
// never materialising the full logits: the max, and then the target logit and the sum of
// exponentials, are reduced over the TP group (one MAX and one SUM all-reduce); backward needs
// no communication. Every TP rank returns the same loss.
LossSum vocab_parallel_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels, Range vocab,
                                const TensorParallel& tp);

}  // namespace ddx::models
