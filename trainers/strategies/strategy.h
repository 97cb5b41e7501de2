#pragma once
// A parallel strategy: how a training step's model, gradients and optimizer state are laid out
// over the ranks. The trainer's loop (data, loss normalisation, schedule, metrics, checkpoints)
// is one code path; strategies only answer the questions below. Each strategy lives in its own
// folder under trainers/strategies/, owns its options and flags, and applies its parallelism in
// setup(); adding one is its folder and one line in strategy_registry.cpp
// (docs/adding-a-strategy.md).
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddx/collectives.h"
#include "ddx/process_group.h"
#include "models/causal_lm.h"
#include "strategies/held.h"
#include "strategies/parallel_dims.h"
#include "strategies/strategy_options.h"

namespace ddx::train {

struct MicroBatch {
  torch::Tensor inputs;  // [b, T] int64 on the training device
  torch::Tensor labels;  // [b, T] int64, -100 = ignored
};

// Seconds spent per phase in the current step; strategies add forward/backward themselves.
struct PhaseTimes {
  double data = 0, forward = 0, backward = 0, update = 0, comm_wait = 0;
};

// What of the run every strategy reads besides its own options: how the weights start, the
// optimizer's settings and the shape of a step.
struct RunSettings {
  uint64_t seed = 0;
  std::string init_from;  // pretrained safetensors (file, index or folder); "": layout-independent init
  double weight_decay = 0;
  bool fused_adamw = false;
  int64_t seq_length = 0;
  int64_t grad_accum = 1;
};

struct StrategyContext {
  const RunSettings& run;
  const ParallelDims& dims;  // resolved and checked before the strategy was made
  const models::ModelConfig& model;
  World& world;
  torch::Device device;
  torch::Dtype dtype;
};

// Per-rank bytes of model state, for the metrics (FSDP fills in the unsharded peak).
struct MemoryAccounting {
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t unsharded_peak_bytes = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Applies the parallelism: builds the mesh of context.dims (parallel_mesh.h), after checks of
  // its own flags against the model, and this rank's part of the model; every layout holds
  // exactly the single-device weights (layout-independent init, or pretrained weights when
  // run.init_from is set).
  virtual void setup(const StrategyContext& context) = 0;

  // Which slice of each global batch this rank reads, and the group over which token counts
  // and losses are summed (nullptr: single process).
  virtual int dp_rank() const = 0;
  virtual int dp_size() const = 0;
  virtual Group* dp_group() = 0;

  // Forward and backward of one step's batch: this rank's micro-batches (--grad-accum of them),
  // with the summed token loss multiplied by `loss_scale` (1 / global target tokens of the
  // step). Returns this rank's unscaled loss sum, counted once per data-parallel replica (the
  // loop sums it over dp_group()). The default runs forward_backward() on each micro-batch in
  // turn; a strategy that interleaves micro-batches (pipeline schedules) overrides this.
  virtual double run_batch(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times) {
    const std::string step = CallSite::current();
    double loss_sum = 0;
    for (size_t m = 0; m < micro.size(); ++m) {
      CallSite site(step + " micro " + std::to_string(m));
      loss_sum += forward_backward(micro[m], loss_scale, m + 1 == micro.size(), times);
    }
    return loss_sum;
  }

  // Forward and backward of one micro-batch, as run_batch() above. Gradients accumulate. When
  // `last_micro` is false no gradient communication happens (no_sync). Returns the local,
  // unscaled loss sum.
  virtual double forward_backward(const MicroBatch& batch, double loss_scale, bool last_micro,
                                  PhaseTimes& times) = 0;

  // Completes outstanding gradient communication; returns seconds spent waiting for it.
  virtual double finish_gradients() = 0;

  // Global gradient norm (before clipping), clipping when max_grad_norm > 0, the optimizer
  // update at `lr`, and zeroing of gradients. Returns the norm.
  virtual double optimizer_step(double lr, double max_grad_norm) = 0;

  // Full parameters, or their gradients, by name in module order on CPU, float32 (float64 when
  // the model trains in float64), on every rank (sharded strategies gather: a collective). The
  // gradients are those the optimizer is about to use: read them after finish_gradients() and
  // before optimizer_step() (`ddx train --grads-file`, the parity suite's gradient check).
  virtual std::vector<std::pair<std::string, torch::Tensor>> full_tensors(Held what) = 0;
  std::vector<std::pair<std::string, torch::Tensor>> full_parameters() { return full_tensors(Held::Parameters); }
  std::vector<std::pair<std::string, torch::Tensor>> full_gradients() { return full_tensors(Held::Gradients); }
  // This rank's own live parameter tensors by name in module order, for the detectors (their
  // gradients for --nan-check, checksums across data-parallel replicas for --replica-check-freq)
  // and parameter faults. Empty (nothing checked) for a strategy that does not expose them.
  virtual std::vector<std::pair<std::string, torch::Tensor>> local_parameters() { return {}; }

  // This rank's own parameter storage (whole tensors, TP slices, or the rows of each parameter
  // an FSDP rank owns) by name in the same order on every rank, for --replica-check-freq and
  // parameter faults; each with the group whose members hold an identical copy, or nullptr when
  // no other rank does (the check then compares it with its checksum from the last update, and
  // the ranks' gathered full parameters with each other). Default: local_parameters() over dp_group().
  struct OwnedParameter {
    std::string name;
    torch::Tensor tensor;
    Group* copies = nullptr;
  };
  virtual std::vector<OwnedParameter> owned_parameters() {
    std::vector<OwnedParameter> out;
    for (auto& [name, tensor] : local_parameters()) out.push_back({name, tensor, dp_group()});
    return out;
  }

  // Checkpoint contents (collective: every rank calls them). `dir` exists on every rank's
  // filesystem view; strategies decide which rank writes what.
  virtual void save_state(const std::string& dir) = 0;
  virtual void load_state(const std::string& dir) = 0;

  virtual MemoryAccounting memory() const = 0;

  // Strategy-specific numbers of the last step for the metrics record (e.g. DDP's buckets
  // launched during backward).
  virtual std::map<std::string, double> step_stats() const { return {}; }
};

// The strategy `name` (strategy_registry.h checks names and resolves `dims`). The options and the
// dimensions may choose between variants of one strategy (2d over FSDP or DDP; pp over FSDP only
// when the world leaves data-parallel ranks).
std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyOptions& options, const ParallelDims& dims);

}  // namespace ddx::train
