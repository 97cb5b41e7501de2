#pragma once
// Tensor parallelism (Megatron layout, parallelism.md §4): the ranks form one TP group and each
// holds its slices of the block matrices and of the vocabulary; the model's parallel layers
// (models/parallel_layers.h) communicate inside forward and backward. Every rank reads the same
// batch. What is left for the strategy:
//  - gradients: a sharded parameter's gradient is complete on its rank. A replicated one (norms,
//    the biases after row-parallel layers, GPT-2's wpe) is the same on every rank, except under
//    --sequence-parallel, where each rank saw only its sequence slice: those are summed over
//    the group in finish_gradients();
//  - clipping: the global norm counts each shard once and each replicated parameter once;
//  - AdamW updates each rank's slices (element-wise: bit-identical to the same slices of the
//    single-device update);
//  - checkpoints: sharded (sharded_checkpoint.h, index version 2): each rank writes the blocks of
//    the full tensors it holds (rank 0 the replicated parameters) and rank 0 an index of their
//    global offsets, so nothing is gathered; they resume here and load under any other
//    strategy and world size (and any checkpoint loads here: each rank reads its slices).
#include <string>

#include "models/tensor_parallel.h"
#include "strategies/replicated/replicated_strategy.h"

namespace ddx::train {

class TpStrategy : public ReplicatedStrategy {
 public:
  void setup(const StrategyContext& context) override;
  double finish_gradients() override;
  NamedTensors full_tensors(Held what) override;
  // Replicated parameters have copies on the TP group; a slice is the only one of its kind.
  std::vector<OwnedParameter> owned_parameters() override;
  void save_state(const std::string& dir) override;
  void load_state(const std::string& dir) override;

 protected:
  double grad_norm_sq() const override;
  bool writes_checkpoint() const override { return group_->rank() == 0; }
  void checkpoint_barrier() override;

 private:
  Group* group_ = nullptr;
  bool sequence_parallel_ = false;
  int64_t bucket_cap_bytes_ = 0;  // the sequence-parallel gradients' sum goes in DDP's buckets
  models::ParameterShards shards_;
  const models::ModelConfig* config_ = nullptr;
};

}  // namespace ddx::train
