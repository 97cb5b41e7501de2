#pragma once
// Data parallelism (`--strategy ddp`): every rank holds the whole model and reads its slice of
// the global batch; gradients are summed over ranks in buckets whose all-reduces start from
// gradient-accumulator hooks the moment a bucket is complete, overlapping the rest of backward.
// The loss is already scaled by 1 / global tokens, so a plain SUM gives exactly the
// single-device gradient (no mean of per-rank means). `--zero1` shards the optimizer state.
#include <torch/torch.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddx/collectives.h"
#include "strategies/ddp/ddp_options.h"
#include "strategies/ddp/grad_buckets.h"
#include "strategies/replicated/replicated_strategy.h"

namespace ddx::train {

class DdpStrategy : public ReplicatedStrategy {
 public:
  explicit DdpStrategy(DdpOptions options = {}) : options_(std::move(options)) {}
  void setup(const StrategyContext& context) override;
  int dp_rank() const override { return group_->rank(); }
  int dp_size() const override { return group_->size(); }
  Group* dp_group() override { return group_; }
  double forward_backward(const MicroBatch& batch, double loss_scale, bool last_micro,
                          PhaseTimes& times) override;
  double finish_gradients() override;
  double optimizer_step(double lr, double max_grad_norm) override;
  void save_state(const std::string& dir) override;
  void load_state(const std::string& dir) override;
  MemoryAccounting memory() const override;
  std::map<std::string, double> step_stats() const override;

  // Called by the hook on a parameter's gradient accumulator once its gradient is complete.
  void gradient_ready(int param);

 protected:
  // setup() over `group` (the world, or 2D's data-parallel dimension) for a model split over a
  // tensor-parallel group (or not: `split` without a group): each rank's TP slices are
  // replicated over `group` and their gradients all-reduced in it.
  void setup_on(const StrategyContext& c, Group& group, const models::TensorParallel& split);
  void apply_updates(double lr) override;
  void zero_gradients() override;
  bool writes_checkpoint() const override { return group_->rank() == 0; }
  void checkpoint_barrier() override { barrier(*group_).wait(); }

 private:
  void start_from_rank0_weights(bool verify_only);
  void build_buckets(const std::vector<int>& order);
  void launch_ready_buckets();
  void launch_bucket(size_t b);
  void rebuild_buckets_in_arrival_order();
  void assign_zero1_owners();
  void broadcast_owned_parameters();

  Group* group_ = nullptr;
  DdpOptions options_;
  bool grad_as_bucket_view_ = false;
  bool zero1_ = false;
  int64_t first_cap_bytes_ = 0, cap_bytes_ = 0;

  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_, slot_of_;  // per parameter
  std::vector<int> pending_;              // per bucket: gradients still to arrive
  std::vector<bool> arrived_;             // per parameter, this backward
  size_t next_to_launch_ = 0;
  std::vector<Work> works_;
  bool sync_ = true;
  bool in_backward_ = false;
  std::vector<int> arrival_order_;
  bool rebuilt_ = false;
  int buckets_in_backward_ = 0;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keep the hooks alive
  std::vector<int> owner_;  // ZeRO-1: data-parallel rank that updates each parameter
};

}  // namespace ddx::train
