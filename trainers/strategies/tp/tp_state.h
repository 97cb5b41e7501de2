#pragma once
// What every strategy with tensor-parallel slices shares (tp, and 2d over FSDP or DDP): the
// gradient norm that counts each shard once, full tensors assembled over the
// TP group, and a TP slice's rows read from any checkpoint. The strategies differ only in how
// the data-parallel dimension holds the slices.
#include <torch/torch.h>

#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/sharded_checkpoint.h"
#include "checkpoint/state_files.h"
#include "models/tensor_parallel.h"
#include "optim/adamw.h"
#include "strategies/strategy.h"

namespace ddx::train {

// Global squared gradient norm from (name, gradient) pairs: sharded parameters' squares are
// summed over `sum_over` (the TP group, or every rank when the data-parallel ranks hold
// disjoint rows too); a replicated parameter's only by TP rank 0, so it counts once.
double sharded_grad_norm_sq(const std::vector<std::pair<std::string, torch::Tensor>>& grads,
                            const models::ParameterShards& shards, int tp_rank, Group& sum_over);

// The full tensor of `local` (a parameter, or optimizer state shaped like it): collective over
// `tp` for sharded parameters, `local` itself for replicated ones.
torch::Tensor full_tp_tensor(Group& tp, const models::ParameterShards& shards, const std::string& name,
                             const torch::Tensor& local);

// full_tp_tensor() of each tensor on CPU, float32 or float64 (Strategy::full_tensors()).
NamedTensors full_tp_parameters(Group& tp, const models::ParameterShards& shards, const NamedTensors& local);

// Each parameter's full shape (its TP slice's shape for replicated ones).
ParameterShapes full_shapes(const NamedTensors& local, const models::ParameterShards& shards);

// The blocks of the full tensor that rows [begin, end) of a rank's local tensor of `name`
// (shape `local_shape`) hold, in local order: concatenated along `dim` they are those rows.
// One block for a replicated parameter; under a dim-0 split one per range the rows reach
// (GPT-2's c_attn: up to three); under a column split one column block per range.
struct TpBlocks {
  int64_t dim = 0;
  std::vector<std::vector<int64_t>> offsets, shapes;  // in the full tensor
};
TpBlocks tp_blocks(const models::ParameterShards& shards, const std::string& name,
                   const std::vector<int64_t>& local_shape, int64_t begin, int64_t end);

// Rows [begin, end) along dim 0 of a rank's local TP tensor `like` of `name` read from a
// checkpoint (any layout), and their AdamW state when the checkpoint has it, on the device and
// dtype of `like`.
struct LocalRows {
  torch::Tensor values;
  std::optional<AdamWState> state;
};
LocalRows read_tp_rows(const CheckpointRows& reader, const std::string& name, const models::ParameterShards& shards,
                       int64_t begin, int64_t end, const torch::Tensor& like);

// Sharded TP and 2D checkpoints (sharded_checkpoint.h's format, version 2): each rank writes the
// blocks of the full tensors its rows hold; a block several ranks hold (a replicated
// parameter, or every slice under --dp-replicate) is written by one of them only.
class TpCheckpointWriter {
 public:
  // Rows [begin, end) of the local tensor of `name` (shape `local_shape`), `rows` being their
  // values, `state` their AdamW state (or nullptr).
  void add(const models::ParameterShards& shards, const std::string& name, const std::vector<int64_t>& local_shape,
           int64_t begin, int64_t end, const torch::Tensor& rows, const AdamWState* state);
  // Collective over `world`: every rank's file, then rank 0's index.
  void write(const std::string& dir, Group& world, const ParameterShapes& full_shapes,
             const models::ModelConfig& config);

 private:
  std::vector<ShardEntry> entries_;
  std::deque<AdamWState> states_;  // the blocks' state slices (stable addresses)
};

// TP and 2D with replicated data-parallel ranks: a checkpoint of each rank's whole slices
// (replicated parameters by TP rank 0; nothing unless `writes` is true), and any checkpoint read
// back as each rank's slices. The checkpoint must hold exactly the parameters `expected` lists
// (by default those of `parameters`; a pipeline stage holds only some of the model's).
void save_tp_checkpoint(const std::string& dir, Group& world, const models::ParameterShards& shards,
                        const NamedTensors& parameters, const std::map<std::string, AdamWState>& state, int tp_rank,
                        bool writes, const models::ModelConfig& config);
void load_tp_checkpoint(const std::string& dir, const models::ParameterShards& shards, NamedTensors& parameters,
                        std::map<std::string, AdamWState>& state, const ParameterShapes& expected = {});

}  // namespace ddx::train
