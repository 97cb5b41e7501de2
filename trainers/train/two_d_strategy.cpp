#include "train/two_d_strategy.h"

#include "ddx/collectives.h"
#include "ddx/errors.h"
#include "ddx/log.h"
#include "models/parallel_layers.h"
#include "train/ddp_strategy.h"
#include "train/fsdp_strategy.h"
#include "train/test_breaks.h"
#include "train/tp_state.h"

namespace ddx::train {
namespace {

struct MeshGroups {
  Group* dp = nullptr;
  Group* tp = nullptr;
  Group* world = nullptr;
};

// The dp x tp mesh, after one-line errors for a --tp the world or the model cannot take.
MeshGroups make_mesh(const StrategyContext& c) {
  if (c.options.tp <= 0) {
    throw UsageError("--strategy 2d needs --tp M: the ranks of each tensor-parallel group (data parallelism over world / M)");
  }
  const int tp = static_cast<int>(c.options.tp), world = c.world.size();
  if (world % tp != 0) {
    throw UsageError("--tp " + std::to_string(tp) + " does not divide the world size " + std::to_string(world) +
                     ": --strategy 2d needs world = dp x tp");
  }
  check_tp_fits_model(c, tp);
  DeviceMesh& mesh = c.world.mesh({{"dp", world / tp}, {"tp", tp}});
  log::debug("2d: ", mesh.describe());
  return {&mesh.group("dp"), &mesh.group("tp"), &c.world.world()};
}

models::TensorParallel split_over(Group* tp) {
  models::TensorParallel split{tp, false};
  split.test_skip_input_reduce = test_breaks().tp_no_input_reduce;
  return split;
}

// TP slices sharded over dp by FSDP.
class TwoDFsdpStrategy : public FsdpStrategy {
 public:
  void setup(const StrategyContext& c) override {
    mesh_ = make_mesh(c);
    setup_on(c, *mesh_.dp, split_over(mesh_.tp));
    shards_ = models::parameter_shards(*model_);
  }

  NamedTensors full_parameters() override {
    return full_tp_parameters(*mesh_.tp, shards_, FsdpStrategy::full_parameters());
  }

  void save_state(const std::string&) override {
    throw UsageError("--strategy 2d (FSDP) cannot write checkpoints yet: run without -e, or with --dp-replicate");
  }
  void load_state(const std::string&) override {
    throw UsageError("--strategy 2d (FSDP) cannot resume checkpoints yet: run without -e, or with --dp-replicate");
  }

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
  MeshGroups mesh_;
  models::ParameterShards shards_;
};

// TP slices replicated over dp by DDP.
class TwoDReplicateStrategy : public DdpStrategy {
 public:
  void setup(const StrategyContext& c) override {
    mesh_ = make_mesh(c);
    setup_on(c, *mesh_.dp, split_over(mesh_.tp));
    shards_ = models::parameter_shards(*model_);
  }

  NamedTensors full_parameters() override { return full_tp_parameters(*mesh_.tp, shards_, parameters_); }

  void save_state(const std::string& dir) override {
    save_full_tp_checkpoint(dir, *mesh_.tp, shards_, parameters_, optimizer_->state(), writes_checkpoint());
    checkpoint_barrier();
  }
  void load_state(const std::string& dir) override { load_tp_checkpoint(dir, shards_, parameters_, optimizer_->state()); }

 protected:
  double grad_norm_sq() const override {
    // After the all-reduce every dp rank holds the same gradients: the TP group's norm is global.
    std::vector<std::pair<std::string, torch::Tensor>> grads;
    for (const auto& [name, p] : parameters_) grads.emplace_back(name, p.grad());
    return sharded_grad_norm_sq(grads, shards_, mesh_.tp->rank(), *mesh_.tp);
  }
  bool writes_checkpoint() const override { return mesh_.world->rank() == 0; }
  void checkpoint_barrier() override { barrier(*mesh_.world).wait(); }

 private:
  MeshGroups mesh_;
  models::ParameterShards shards_;
};

}  // namespace

std::unique_ptr<Strategy> make_two_d_strategy(const TrainOptions& options) {
  if (options.dp_replicate) return std::make_unique<TwoDReplicateStrategy>();
  return std::make_unique<TwoDFsdpStrategy>();
}

}  // namespace ddx::train
