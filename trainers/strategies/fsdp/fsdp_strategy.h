#pragma once
// Fully sharded data parallelism (`--strategy fsdp`), FSDP2's design in C++ on c10d.
//
// Units, in forward order: the root (parameters several units use, e.g. a tied embedding),
// the embeddings, each transformer block, and the head (final norm + LM head). Every
// parameter is sharded along dim 0 over the data-parallel group (shard_layout.h); a rank holds
// only its rows of the weights, their gradients and their AdamW state.
//
// A step:
//   forward   for each unit: all-gather its shards (one flat collective), run it, free the
//             gathered weights again unless --no-reshard-after-forward (the head is kept:
//             backward needs it at once; the root lives until the end of backward).
//             --prefetch N starts the next N units' all-gathers before running this one.
//   backward  a hook on each unit's output re-gathers the unit just before its backward (and
//             prefetches the N units before it); when all of a unit's gradients are in, they
//             are reduce-scattered through one flat buffer and the unit is freed.
//   update    global gradient norm from the shards (one all-reduce), clipping, AdamW on the
//             local rows only; element-wise, so bit-identical to the same rows of a full update.
//
// The loss is scaled by 1 / global tokens before backward, so the reduce-scatter is a SUM and
// reproduces the single-device gradient exactly as DDP's all-reduce does.
#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/sharded_checkpoint.h"
#include "optim/adamw.h"
#include "strategies/fsdp/activation_checkpoint.h"
#include "strategies/fsdp/fsdp_options.h"
#include "strategies/fsdp/fsdp_unit.h"
#include "strategies/strategy.h"

namespace ddx::train {

// Which of the model's pieces this rank's units hold: all of them (FSDP, 2D), or a pipeline
// stage's (pp x FSDP): some blocks, the embeddings on the first stage, the head on the last. The
// root (parameters several units use, e.g. a tied embedding) is held with the embeddings or head.
struct FsdpPieces {
  std::vector<bool> blocks;  // per block; empty: every block
  bool embeddings = true;
  bool head = true;
};

class FsdpStrategy : public Strategy {
 public:
  explicit FsdpStrategy(FsdpOptions options = {}) : options_(std::move(options)) {}
  void setup(const StrategyContext& context) override;
  int dp_rank() const override { return group_->rank(); }
  int dp_size() const override { return group_->size(); }
  Group* dp_group() override { return group_; }
  double forward_backward(const MicroBatch& batch, double loss_scale, bool last_micro,
                          PhaseTimes& times) override;
  double finish_gradients() override;
  double optimizer_step(double lr, double max_grad_norm) override;
  std::vector<std::pair<std::string, torch::Tensor>> full_tensors(Held what) override;
  // The rows this rank owns of every parameter (possibly none), each the only copy.
  std::vector<OwnedParameter> owned_parameters() override;
  void save_state(const std::string& dir) override;
  void load_state(const std::string& dir) override;
  MemoryAccounting memory() const override;
  std::map<std::string, double> step_stats() const override;

  // Autograd hooks.
  void before_unit_backward(int unit);
  void gradient_ready(int unit, int param);

 protected:
  // setup() over `group` (the world, or 2D's data-parallel dimension) for a model split over a
  // tensor-parallel group (or not: `split` without a group). Each unit then shards this rank's
  // TP slices along dim 0.
  void setup_on(const StrategyContext& c, Group& group, const models::TensorParallel& split,
                const FsdpPieces& pieces = {});
  // The model's pieces, each through its unit: gathered first (prefetching the next units),
  // freed after unless kept, and re-gathered by a hook just before its backward. A caller that
  // runs units itself (the pipeline: one stage at a time, micro-batches interleaved) calls
  // expect_backward() for each unit before a backward through it: `reduce` reduce-scatters the
  // unit's gradients once they are in (its last backward of the step); otherwise they
  // accumulate unsharded, as under --grad-accum.
  torch::Tensor run_embeddings(const torch::Tensor& tokens);
  torch::Tensor run_block(int64_t i, const torch::Tensor& hidden);
  torch::Tensor run_head(const torch::Tensor& hidden);
  void expect_backward(int unit, bool reduce);
  void gather(int unit) { ensure_gathered(unit); }
  // Prefetch only among units [first, last] (a pipeline stage's); (-1, -1): all of them.
  void limit_prefetch(int first, int last) { prefetch_range_ = {first, last}; }
  // Global squared gradient norm from the sharded gradients (all-reduced over the group).
  virtual double grad_norm_sq();
  // Calls fn(unit, index in unit, parameter, row_begin, row_end) for every parameter this rank
  // owns rows of, under no-grad.
  using OwnedRowsFunction = std::function<void(FsdpUnit&, size_t, const ShardedParameter&, int64_t, int64_t)>;
  void for_each_owned(const OwnedRowsFunction& fn);
  // Every unit's whole parameters (or gradients) by name on CPU (collective over the group).
  std::map<std::string, torch::Tensor> gather_units(Held what);
  // Checkpoints of the strategies built on FSDP (2D, pipeline x FSDP): each rank's rows of the
  // parameters `writes` accepts, as blocks of the full tensors (`full_shapes`; TP slices placed
  // by `shards`), one file per rank of `world` (sharded_checkpoint.h's version 2), nothing
  // gathered; and any checkpoint read back as this rank's rows.
  void save_blocks(const std::string& dir, Group& world, const ParameterShapes& full_shapes,
                   const models::ParameterShards& shards, const std::function<bool(const std::string&)>& writes);
  void load_blocks(const std::string& dir, const ParameterShapes& full_shapes, const models::ParameterShards& shards);
  std::vector<ShardEntry> shard_entries();
  const FsdpOptions& fsdp_options() const { return options_; }

  Group* group_ = nullptr;
  int root_ = -1, embeddings_ = -1, head_ = -1;  // units (-1: none here)
  std::vector<int> blocks_;                      // unit of block i (-1: not held here)
  std::shared_ptr<models::CausalLM> model_;  // skeleton: parameters live in the units
  std::vector<std::unique_ptr<FsdpUnit>> units_;
  std::unique_ptr<AdamW> optimizer_;
  const models::ModelConfig* config_ = nullptr;

 private:
  void build_units(const StrategyContext& c, const FsdpDevices& devices, const FsdpPrecision& precision,
                   const FsdpPieces& pieces);
  void initialise_shards(const StrategyContext& c, const models::TensorParallel& split);
  ParameterShapes parameter_shapes() const;
  torch::Tensor run_unit(int unit, const std::function<torch::Tensor()>& forward);
  void ensure_gathered(int unit);
  void prefetch(int position, int direction);
  void after_unit_backward(int unit);
  void finish_pending_reduce_scatters();
  void note_memory();

  FsdpOptions options_;
  torch::Device device_ = torch::kCPU;
  std::vector<bool> reshard_after_forward_;
  int prefetch_ = 1;
  std::pair<int, int> prefetch_range_{-1, -1};
  bool checkpoint_activations_ = false;
  std::vector<BlockFunction> block_functions_;  // for activation checkpointing

  // Backward bookkeeping.
  std::vector<bool> reduce_;               // per unit: reduce-scatter after this backward
  std::vector<int> pending_;               // per unit: gradients still to arrive
  std::vector<std::vector<bool>> arrived_; // per unit and parameter
  std::vector<bool> backward_done_;        // per unit
  std::vector<int> reduce_order_;          // units whose reduce-scatter is in flight, in issue order
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keep the hooks alive

  // Statistics.
  double gather_wait_s_ = 0;
  double reduce_wait_s_ = 0;  // this step's waits for reduce-scatters (reported as comm wait)
  int gathers_ = 0, prefetched_ = 0, reduce_scatters_ = 0;
  int64_t unsharded_peak_bytes_ = 0;
  std::map<std::string, double> last_stats_;
};

}  // namespace ddx::train
