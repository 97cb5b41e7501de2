#pragma once
// The pipeline executor: runs one rank's schedule (pp_schedule.h) over a step's micro-batches.
// A forward of stage s receives its input activation from stage s - 1 (stage 0 embeds the
// tokens), runs the stage's blocks and sends the output to stage s + 1; the last stage applies
// the final norm, the head and the loss, scaled by the step's loss scale. A backward receives
// the output's gradient from stage s + 1 (the last stage starts from its loss), back-propagates
// through the stage and sends the input's gradient to stage s - 1. Sends and receives go through
// the collective layer, so the flight recorder holds every one and a stage that stops is named.
// Sends are not waited on until the end of the step; receives block.
#include <torch/torch.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "ddx/collectives.h"
#include "models/causal_lm.h"
#include "strategies/pp/pp_schedule.h"
#include "strategies/pp/pp_stages.h"
#include "strategies/strategy.h"

namespace ddx::train {

// What runs a stage's pieces: run_on_model() below (the model holds this rank's weights), or
// pipeline x FSDP's units (pp_strategy.cpp), gathered before use, their gradients accumulated
// over the step's micro-batches and reduce-scattered after each unit's last backward.
class StageRunner {
 public:
  virtual ~StageRunner() = default;
  virtual torch::Tensor embed(const torch::Tensor& tokens) = 0;
  virtual torch::Tensor block(int64_t i, const torch::Tensor& hidden) = 0;
  virtual torch::Tensor head(const torch::Tensor& hidden) = 0;
  // Before the step's first action (with its micro-batch count), and before each forward and
  // each backward of `stage` on this rank.
  virtual void begin_step(int /*microbatches*/) {}
  virtual void before_forward(int /*stage*/) {}
  virtual void before_backward(int /*stage*/) {}
};

std::unique_ptr<StageRunner> run_on_model(models::CausalLM& model);

class PipelineExecutor {
 public:
  // `runner` runs this rank's stages (`model` gives the configuration and the loss); `pp` is the
  // pipeline group, whose rank r holds stages r, r + p, ... (V of them).
  PipelineExecutor(models::CausalLM& model, StageRunner& runner, Group& pp, const ScheduleKind& kind, StageSplit split,
                   int virtual_stages, torch::Device device, torch::Dtype activation_dtype);

  // Runs this rank's schedule over `micro`. Gradients accumulate in the model's parameters.
  // Returns the unscaled loss sum of all micro-batches on the rank holding the last stage, 0
  // elsewhere. `events` receives what this rank did, in order.
  double run(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times,
             std::vector<PipeEvent>& events);

  PipeShape shape(int microbatches) const;
  // The most micro-batches this rank held between a forward and its backward during the last
  // run() (counted per (micro-batch, stage)), and the most bytes of stage-boundary activations
  // (received inputs and sent outputs) it kept for them; the activations autograd saves inside
  // a stage grow with the same count.
  struct InFlight {
    int microbatches = 0;
    int64_t bytes = 0;
  };
  InFlight peak_in_flight() const { return peak_; }
  const StageSplit& split() const { return split_; }
  const ScheduleKind& kind() const { return kind_; }

 private:
  // What a forward leaves for its backward.
  struct Saved {
    torch::Tensor input;   // the received activation (requires grad); undefined on stage 0
    torch::Tensor output;  // the sent activation, or the scaled loss on the last stage
  };
  int rank_of(int stage) const { return stage % pp_.size(); }
  int tag(int microbatch, int stage, bool gradient) const;
  void send(const torch::Tensor& t, int to_stage, int tag, std::vector<PipeEvent>& events, int microbatch,
            double now);
  void recv(torch::Tensor& t, int from_stage, int tag, std::vector<PipeEvent>& events, int microbatch,
            double& waited, const std::chrono::steady_clock::time_point& start);

  models::CausalLM& model_;
  StageRunner& runner_;
  Group& pp_;
  const ScheduleKind& kind_;
  StageSplit split_;
  int virtual_stages_;
  torch::Device device_;
  torch::Dtype activation_dtype_;
  static int64_t bytes_of(const Saved& saved);
  std::map<std::pair<int, int>, Saved> saved_;  // (micro-batch, stage)
  int64_t saved_bytes_ = 0;                     // bytes_of() summed over saved_
  InFlight peak_;
  std::vector<std::pair<Work, torch::Tensor>> sends_;  // in flight until the end of the step
  std::map<int, torch::Tensor> local_;  // hand-offs between two stages of one rank (p = 1)
};

}  // namespace ddx::train
