#include "strategies/two_d/two_d_strategy.h"

#include "ddx/collectives.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "models/parallel_layers.h"
#include "strategies/ddp/ddp_options.h"
#include "strategies/ddp/ddp_strategy.h"
#include "strategies/ddp/grad_buckets.h"
#include "strategies/fsdp/fsdp_strategy.h"
#include "strategies/parallel_mesh.h"
#include "strategies/tp/tp_state.h"
#include "strategies/planted_bugs.h"

namespace ddx::train {
namespace {

// The dp x tp mesh of c.dims (--tp required and dividing the world: parallel_dims.cpp), after
// one-line errors for a --tp the model cannot take.
ParallelMesh make_mesh(const StrategyContext& c) {
  ParallelMesh mesh = build_parallel_mesh(c);
  log::debug("2d: ", mesh.describe());
  return mesh;
}

models::TensorParallel split_over(Group* tp, bool sequence_parallel) {
  models::TensorParallel split{tp, sequence_parallel};
  split.test_skip_input_reduce = planted_bugs().tp_no_input_reduce;
  return split;
}

// TP slices sharded over dp by FSDP.
class TwoDFsdpStrategy : public FsdpStrategy {
 public:
  explicit TwoDFsdpStrategy(const FsdpOptions& options) : FsdpStrategy(options) {}
  void setup(const StrategyContext& c) override {
    mesh_ = make_mesh(c);
    sequence_parallel_ = c.dims.sequence_parallel;
    bucket_cap_bytes_ = megabytes_to_bytes(kDefaultBucketCapMb);
    setup_on(c, *mesh_.dp, split_over(mesh_.tp, sequence_parallel_));
    shards_ = models::parameter_shards(*model_);
    NamedTensors local;  // skeleton tensors: shapes only
    for (auto& item : model_->named_parameters()) local.emplace_back(item.key(), item.value());
    full_shapes_ = full_shapes(local, shards_);
  }

  double finish_gradients() override {
    double waited = FsdpStrategy::finish_gradients();
    if (!sequence_parallel_ || planted_bugs().sp_no_replicated_reduce) return waited;  // the planted bug, on purpose
    // The dp-reduced rows of the replicated parameters, still partial over the TP group.
    std::vector<torch::Tensor> grads;
    for (const auto& unit : units_) {
      for (size_t i = 0; i < unit->layout().parameters.size(); ++i) {
        if (!shards_.count(unit->layout().parameters[i].name)) grads.push_back(unit->owned_grad_rows(i));
      }
    }
    return waited + sum_gradients_in_buckets(*mesh_.tp, grads, bucket_cap_bytes_);
  }

  NamedTensors full_tensors(Held what) override {
    return full_tp_parameters(*mesh_.tp, shards_, FsdpStrategy::full_tensors(what));
  }

  void save_state(const std::string& dir) override {
    // Each rank's FSDP rows of its TP slices; the replicated parameters' rows by TP rank 0 of
    // each dp rank.
    save_blocks(dir, *mesh_.world, full_shapes_, shards_,
                [&](const std::string& name) { return shards_.count(name) || mesh_.tp->rank() == 0; });
  }

  // Any checkpoint, read as this rank's rows of its TP slices.
  void load_state(const std::string& dir) override { load_blocks(dir, full_shapes_, shards_); }

 protected:
  double grad_norm_sq() override {
    // FSDP rows over dp and TP slices over tp are disjoint: sharded squares add over the world.
    std::vector<std::pair<std::string, torch::Tensor>> grads;
    for (const auto& unit : units_) {
      for (size_t i = 0; i < unit->layout().parameters.size(); ++i) {
        grads.emplace_back(unit->layout().parameters[i].name, unit->owned_grad_rows(i));
      }
    }
    return sharded_grad_norm_sq(grads, shards_, mesh_.tp->rank(), *mesh_.world);
  }

 private:
  ParallelMesh mesh_;
  bool sequence_parallel_ = false;
  int64_t bucket_cap_bytes_ = 0;  // the sequence-parallel gradients' sum goes in DDP's buckets
  models::ParameterShards shards_;
  ParameterShapes full_shapes_;
};

// TP slices replicated over dp by DDP.
class TwoDReplicateStrategy : public DdpStrategy {
 public:
  void setup(const StrategyContext& c) override {
    mesh_ = make_mesh(c);
    config_ = &c.model;
    sequence_parallel_ = c.dims.sequence_parallel;
    bucket_cap_bytes_ = megabytes_to_bytes(kDefaultBucketCapMb);
    setup_on(c, *mesh_.dp, split_over(mesh_.tp, sequence_parallel_));
    shards_ = models::parameter_shards(*model_);
  }

  double finish_gradients() override {
    double waited = DdpStrategy::finish_gradients();
    if (!sequence_parallel_ || planted_bugs().sp_no_replicated_reduce) return waited;  // the planted bug, on purpose
    std::vector<torch::Tensor> grads;  // dp-reduced, still partial over the TP group
    for (auto& [name, p] : parameters_) {
      if (!shards_.count(name)) grads.push_back(p.grad());
    }
    return waited + sum_gradients_in_buckets(*mesh_.tp, grads, bucket_cap_bytes_);
  }

  NamedTensors full_tensors(Held what) override {
    return full_tp_parameters(*mesh_.tp, shards_, held_tensors(parameters_, what));
  }

  void save_state(const std::string& dir) override {
    // The dp ranks hold the same slices: those of dp rank 0 write them.
    save_tp_checkpoint(dir, *mesh_.world, shards_, parameters_, optimizer_->state(), mesh_.tp->rank(),
                       mesh_.dp->rank() == 0, *config_);
  }
  void load_state(const std::string& dir) override { load_tp_checkpoint(dir, shards_, parameters_, optimizer_->state()); }

 protected:
  double grad_norm_sq() const override {
    // After the all-reduce every dp rank holds the same gradients: the TP group's norm is global.
    std::vector<std::pair<std::string, torch::Tensor>> grads;
    for (const auto& [name, p] : parameters_) grads.emplace_back(name, p.grad());
    return sharded_grad_norm_sq(grads, shards_, mesh_.tp->rank(), *mesh_.tp);
  }

 private:
  ParallelMesh mesh_;
  bool sequence_parallel_ = false;
  int64_t bucket_cap_bytes_ = 0;  // the sequence-parallel gradients' sum goes in DDP's buckets
  models::ParameterShards shards_;
  const models::ModelConfig* config_ = nullptr;
};

}  // namespace

std::unique_ptr<Strategy> make_two_d_strategy(const FsdpOptions& fsdp, const ParallelDims& dims) {
  // DDP's own flags are not 2d's: its replicas run with DDP's defaults.
  if (dims.dp_replicate) return std::make_unique<TwoDReplicateStrategy>();
  return std::make_unique<TwoDFsdpStrategy>(fsdp);
}

}  // namespace ddx::train
