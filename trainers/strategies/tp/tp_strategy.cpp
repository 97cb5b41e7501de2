#include "strategies/tp/tp_strategy.h"

#include "ddx/collectives.h"
#include "ddx/errors/errors.h"
#include "models/parallel_layers.h"
#include "strategies/ddp/ddp_options.h"
#include "strategies/ddp/grad_buckets.h"
#include "strategies/parallel_mesh.h"
#include "strategies/tp/tp_state.h"
#include "strategies/planted_bugs.h"

namespace ddx::train {

// Tensor parallelism applied: one TP group over every rank, the model built with its blocks and
// vocabulary split over it, and the list of which parameters are slices.
void TpStrategy::setup(const StrategyContext& c) {
  group_ = build_parallel_mesh(c).tp;  // c.dims: tp = the world (parallel_dims.cpp)
  sequence_parallel_ = c.dims.sequence_parallel;
  bucket_cap_bytes_ = megabytes_to_bytes(kDefaultBucketCapMb);
  models::TensorParallel split{group_, sequence_parallel_};
  split.test_skip_input_reduce = planted_bugs().tp_no_input_reduce;
  build(c, split);
  shards_ = models::parameter_shards(*model_);
  config_ = &c.model;
}

double TpStrategy::finish_gradients() {
  if (!sequence_parallel_ || planted_bugs().sp_no_replicated_reduce) return 0.0;  // the planted bug, on purpose
  // The replicated parameters ran on each rank's sequence slice: their gradients are partial sums.
  std::vector<torch::Tensor> grads;
  for (auto& [name, p] : parameters_) {
    if (!shards_.count(name)) grads.push_back(p.grad());
  }
  return sum_gradients_in_buckets(*group_, grads, bucket_cap_bytes_);
}

double TpStrategy::grad_norm_sq() const {
  std::vector<std::pair<std::string, torch::Tensor>> grads;
  for (const auto& [name, p] : parameters_) grads.emplace_back(name, p.grad());
  return sharded_grad_norm_sq(grads, shards_, group_->rank(), *group_);
}

std::vector<Strategy::OwnedParameter> TpStrategy::owned_parameters() {
  std::vector<OwnedParameter> out;
  for (auto& [name, p] : parameters_) out.push_back({name, p, shards_.count(name) ? nullptr : group_});
  return out;
}

NamedTensors TpStrategy::full_tensors(Held what) { return full_tp_parameters(*group_, shards_, held_tensors(parameters_, what)); }

void TpStrategy::save_state(const std::string& dir) {
  save_tp_checkpoint(dir, *group_, shards_, parameters_, optimizer_->state(), group_->rank(), true, *config_);
}

void TpStrategy::load_state(const std::string& dir) {
  // Any checkpoint (single-device format, FSDP, TP or 2D shards), read as this rank's slices.
  load_tp_checkpoint(dir, shards_, parameters_, optimizer_->state());
}

void TpStrategy::checkpoint_barrier() { barrier(*group_).wait(); }

}  // namespace ddx::train
