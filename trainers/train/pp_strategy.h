#pragma once
// Pipeline parallelism (parallelism.md §6): the model's blocks are cut into --pp x V stages
// (pp_stages.h), rank r of the pipeline group holding stages r, r + p, ... with the embedding on
// stage 0 and the final norm, head and loss on the last; a schedule (pp_schedule.h) orders
// each rank's forwards and backwards over the step's micro-batches (-b split into
// --microbatches, times --grad-accum) and the executor (pp_executor.h) runs them, moving
// activations and their gradients with send/recv. The mesh is pp x dp: the ranks left over
// form data-parallel replicas of the whole pipeline, each reading its slice of the batch.
//  - loss: every stage scales by 1 / global tokens of the step, so gradients are those of the
//    single-device step; the last stage's loss sum is broadcast over the pipeline;
//  - gradients: a tied embedding (GPT-2's wte, used by stage 0 and by the head) is held by the
//    first and the last stage and its two gradients summed over the pipeline (Megatron's
//    embedding group); then every gradient is summed over the dp group (one flat all-reduce);
//  - clipping: the norm's squares are summed over the pipeline, a tied parameter counted once;
//  - checkpoints: sharded, each rank writing its stages' parameters (rows split over the dp
//    replicas) as pieces of the full tensors (fsdp_checkpoint.h), so a pipeline checkpoint
//    loads under any strategy and any checkpoint loads here, each rank reading its stages'.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "train/pp_executor.h"
#include "train/replicated_strategy.h"

namespace ddx::train {

class PpStrategy : public ReplicatedStrategy {
 public:
  void setup(const StrategyContext& context) override;
  int dp_rank() const override;
  int dp_size() const override;
  Group* dp_group() override { return dp_; }
  double run_batch(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times) override;
  double forward_backward(const MicroBatch& batch, double loss_scale, bool last_micro, PhaseTimes& times) override;
  double finish_gradients() override;
  NamedTensors full_parameters() override;
  void save_state(const std::string& dir) override;
  void load_state(const std::string& dir) override;
  std::map<std::string, double> step_stats() const override { return stats_; }

 protected:
  double grad_norm_sq() const override;

 private:
  // The full parameter `name`, broadcast over the pipeline from the rank that holds it.
  torch::Tensor from_owner(const std::string& name, const std::vector<int64_t>& shape);
  // Splits each of the step's batches into --microbatches pipeline micro-batches.
  std::vector<MicroBatch> pipeline_microbatches(const std::vector<MicroBatch>& micro) const;
  // Bubble of the last step (metrics) and, with --pp-trace, its timeline.
  void measure(const std::vector<PipeEvent>& events, int microbatches);

  Group* pp_ = nullptr;
  Group* dp_ = nullptr;
  int dp_rank_ = 0;
  std::unique_ptr<PipelineExecutor> executor_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> full_shapes_;  // every parameter, module order
  std::map<std::string, int> owner_;   // pipeline rank that holds (for a tied one: writes) each parameter
  std::set<std::string> tied_;         // held by the first and the last stage
  int64_t microbatches_ = 1;
  const models::ModelConfig* config_ = nullptr;
  std::string trace_path_;
  std::vector<std::vector<PipeEvent>> trace_;  // rank 0: every pipeline rank's events, steps appended
  int traced_steps_ = 0;
  double trace_offset_ = 0;  // seconds: where the next traced step starts in the picture
  double bubble_sum_ = 0;    // measured bubbles of the traced steps
  std::map<std::string, double> stats_;
};

}  // namespace ddx::train
