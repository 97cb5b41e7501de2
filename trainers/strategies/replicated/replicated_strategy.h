#pragma once
// Every rank holds the whole model and the optimizer state for all of it: the single-device
// trainer, and the base of data parallelism (which adds gradient communication).
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/state_files.h"
#include "optim/adamw.h"
#include "strategies/strategy.h"

namespace ddx::train {

class ReplicatedStrategy : public Strategy {
 public:
  void setup(const StrategyContext& context) override;
  int dp_rank() const override { return 0; }
  int dp_size() const override { return 1; }
  Group* dp_group() override { return nullptr; }
  double forward_backward(const MicroBatch& batch, double loss_scale, bool last_micro,
                          PhaseTimes& times) override;
  double finish_gradients() override { return 0.0; }
  double optimizer_step(double lr, double max_grad_norm) override;
  NamedTensors full_tensors(Held what) override;
  NamedTensors local_parameters() override { return parameters_; }
  void save_state(const std::string& dir) override;
  void load_state(const std::string& dir) override;
  MemoryAccounting memory() const override;

 protected:
  // setup() with the model split over a tensor-parallel group (or not: `tp` without a group).
  void build(const StrategyContext& context, const models::TensorParallel& tp);
  // The update itself, after clipping; ZeRO-1 overrides it to update only its partition.
  virtual void apply_updates(double lr);
  // Every parameter's update; with `grad_norm_sq`, the update also sums the squared gradients.
  void update_all(double lr, double* grad_norm_sq);
  // Global squared gradient norm (all parameters here; TP sums its shards over the group).
  virtual double grad_norm_sq() const;
  virtual void zero_gradients();

  // Checkpoint writer rank: 0 of the world (the dp group's rank 0 for DP strategies).
  virtual bool writes_checkpoint() const { return true; }
  // Barrier around checkpoint files so no rank reads a half-written one.
  virtual void checkpoint_barrier() {}

  std::shared_ptr<models::CausalLM> model_;
  NamedTensors parameters_;  // named_parameters() in module order
  std::unique_ptr<AdamW> optimizer_;
  torch::Device device_ = torch::kCPU;
  World* world_ = nullptr;
  // The single strategy: the global norm is the sum over the parameters update_all() visits, so
  // with nothing to clip it is read during the update (setup() sets it; the subclasses' norms
  // span a group or their updates a partition, so they keep the separate pass).
  bool norm_in_update_ = false;
};

}  // namespace ddx::train
