#pragma once
// What every strategy with tensor-parallel slices shares (tp, and 2d over FSDP or DDP): the
// layout checks, the gradient norm that counts each shard once, full tensors assembled over the
// TP group, and a TP slice's rows read from any checkpoint. The strategies differ only in how
// the data-parallel dimension holds the slices.
#include <torch/torch.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/tensor_parallel.h"
#include "train/adamw.h"
#include "train/fsdp_checkpoint.h"
#include "train/state_files.h"
#include "train/strategy.h"

namespace ddx::train {

// One-line UsageErrors for head counts (query or KV) that `tp` does not divide, and a sequence
// that --sequence-parallel cannot split.
void check_tp_fits_model(const StrategyContext& context, int tp);

// Global squared gradient norm from (name, gradient) pairs: sharded parameters' squares are
// summed over `sum_over` (the TP group, or every rank when the data-parallel ranks hold
// disjoint rows too); a replicated parameter's only by TP rank 0, so it counts once.
double sharded_grad_norm_sq(const std::vector<std::pair<std::string, torch::Tensor>>& grads,
                            const models::ParameterShards& shards, int tp_rank, Group& sum_over);

// The full tensor of `local` (a parameter, or optimizer state shaped like it): collective over
// `tp` for sharded parameters, `local` itself for replicated ones.
torch::Tensor full_tp_tensor(Group& tp, const models::ParameterShards& shards, const std::string& name,
                             const torch::Tensor& local);

// full_tp_tensor() of each parameter, float32 on CPU (Strategy::full_parameters()).
NamedTensors full_tp_parameters(Group& tp, const models::ParameterShards& shards, const NamedTensors& local);

// Each parameter's full shape (its TP slice's shape for replicated ones).
ParameterShapes full_shapes(const NamedTensors& local, const models::ParameterShards& shards);

// Rows [begin, end) along dim 0 of a rank's local TP tensor of `name` read from a checkpoint
// (any layout), and their AdamW state when the checkpoint has it, on the device and dtype of
// `like`.
struct LocalRows {
  torch::Tensor values;
  std::optional<AdamWState> state;
};
LocalRows read_tp_rows(const CheckpointRows& reader, const std::string& name, const models::ParameterShards& shards,
                       int64_t begin, int64_t end, const torch::Tensor& like);

// TP (and 2D with replicated data-parallel ranks) checkpoints: the full tensors assembled over
// `tp` and written by `writer` in the single-device format; and any checkpoint read back as
// each rank's slices.
void save_full_tp_checkpoint(const std::string& dir, Group& tp, const models::ParameterShards& shards,
                             const NamedTensors& parameters, const std::map<std::string, AdamWState>& state,
                             bool writer);
void load_tp_checkpoint(const std::string& dir, const models::ParameterShards& shards, NamedTensors& parameters,
                        std::map<std::string, AdamWState>& state);

}  // namespace ddx::train
