#pragma once
// What pipeline parallelism adds to the strategy holding the data-parallel dimension
// (pp_strategy.h): the pp x dp (x tp) mesh, the cut of the blocks into stages, the executor
// and its measurements, and the full parameters assembled over the pipeline.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/state_files.h"
#include "strategies/fsdp/fsdp_strategy.h"
#include "strategies/pp/pp_executor.h"
#include "strategies/pp/pp_options.h"

namespace ddx::train {

class Pipeline {
 public:
  // Checks the stages against the model and the step (one-line UsageErrors), makes the mesh of
  // c.dims and cuts the blocks into stages as `options` say.
  void plan(const StrategyContext& c, const PpOptions& options);
  // Starts the executor: `runner` runs this rank's stages of `model`.
  void start(models::CausalLM& model, StageRunner& runner, torch::Device device, torch::Dtype activations);

  Group& pp() const { return *pp_; }
  Group& dp() const { return *dp_; }
  // The TP group of this rank's stage slices (nullptr without --tp), and the split the model is
  // built with.
  Group* tp() const { return tp_; }
  int tp_rank() const { return tp_ ? tp_->rank() : 0; }
  models::TensorParallel tensor_parallel() const;
  int dp_rank() const { return dp_rank_; }
  int dp_size() const { return dp_->size(); }
  const StageSplit& split() const { return split_; }
  int stages() const { return split_.stages(); }
  // This rank's stages, in order.
  std::vector<int> my_stages() const;
  // Whether this rank's stages use parameter `name` (a tied one: the first and the last stage);
  // whether this rank counts and writes it (a tied one: the first stage's rank only).
  bool holds(const std::string& name) const;
  bool owns(const std::string& name) const { return owner_.at(name) == pp_->rank(); }
  const std::set<std::string>& tied() const { return tied_; }
  const ParameterShapes& full_shapes() const { return full_shapes_; }
  // Which model pieces this rank's stages hold, for FSDP's units.
  FsdpPieces pieces() const;

  // The step: micro-batches through the schedule; returns the loss sum (as Strategy::run_batch).
  double run_batch(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times);
  const std::map<std::string, double>& stats() const { return stats_; }
  // Every parameter (or gradient: `held` says which) on CPU in full_dtype() of the activations,
  // broadcast over the pipeline from the rank that owns it; `held`: this rank's (at least those
  // it owns), whole (TP slices already assembled).
  NamedTensors full_tensors(const std::map<std::string, torch::Tensor>& held, torch::Device device);

 private:
  // Splits each of the step's batches into --microbatches pipeline micro-batches.
  std::vector<MicroBatch> pipeline_microbatches(const std::vector<MicroBatch>& micro) const;
  // Bubble of the last step (metrics) and, with --pp-trace, its timeline.
  void measure(const std::vector<PipeEvent>& events, int microbatches);

  Group* pp_ = nullptr;
  Group* dp_ = nullptr;
  Group* tp_ = nullptr;
  int dp_rank_ = 0;
  int num_layers_ = 0;
  int virtual_stages_ = 1;
  const ScheduleKind* kind_ = nullptr;
  StageSplit split_;
  std::unique_ptr<PipelineExecutor> executor_;
  torch::Dtype full_dtype_ = torch::kFloat32;  // of full_tensors(): every rank the same
  ParameterShapes full_shapes_;        // every parameter (whole, not TP slices), module order
  std::map<std::string, int> owner_;   // pipeline rank that holds (for a tied one: writes) each parameter
  std::set<std::string> tied_;         // held by the first and the last stage
  int64_t microbatches_ = 1;
  std::string trace_path_;
  std::vector<std::vector<PipeEvent>> trace_;  // rank 0: every pipeline rank's events, steps appended
  int traced_steps_ = 0;
  double trace_offset_ = 0;  // seconds: where the next traced step starts in the picture
  double bubble_sum_ = 0;    // measured bubbles of the traced steps
  std::map<std::string, double> stats_;
};

}  // namespace ddx::train
