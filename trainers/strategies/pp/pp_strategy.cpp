#include "strategies/pp/pp_strategy.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "checkpoint/sharded_checkpoint.h"
#include "ddx/collectives.h"
#include "ddx/errors/errors.h"
#include "models/parallel_layers.h"
#include "strategies/ddp/grad_buckets.h"
#include "strategies/fsdp/fsdp_strategy.h"
#include "strategies/pp/pp_pipeline.h"
#include "strategies/replicated/replicated_strategy.h"
#include "strategies/tp/tp_state.h"
#include "strategies/planted_bugs.h"
#include "ddx/text/clock_time.h"

namespace ddx::train {
namespace {

// Each stage replicated over the dp group (--dp-replicate, or no data parallelism): the whole
// model (this rank's TP slices of it under --tp) is built (layout-independent init, or
// --init-from) and every parameter no stage of this rank uses is released.
class PpStrategy : public ReplicatedStrategy {
 public:
  explicit PpStrategy(PpOptions options) : options_(std::move(options)) {}
  void setup(const StrategyContext& c) override {
    pipeline_.plan(c, options_);
    config_ = &c.model;
    bucket_cap_bytes_ = megabytes_to_bytes(kDefaultBucketCapMb);
    build(c, pipeline_.tensor_parallel());
    shards_ = models::parameter_shards(*model_);
    NamedTensors held;
    for (auto& [name, p] : parameters_) {
      if (pipeline_.tied().count(name)) tied_shapes_[name] = p.sizes().vec();  // this rank's slice
      if (pipeline_.holds(name)) {
        held.emplace_back(name, p);
      } else {
        p.set_data(torch::empty({0}, p.options()));
      }
    }
    parameters_ = std::move(held);
    runner_ = run_on_model(*model_);
    pipeline_.start(*model_, *runner_, c.device, c.dtype);
  }
  int dp_rank() const override { return pipeline_.dp_rank(); }
  int dp_size() const override { return pipeline_.dp_size(); }
  Group* dp_group() override { return &pipeline_.dp(); }
  double run_batch(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times) override {
    return pipeline_.run_batch(micro, loss_scale, times);
  }
  double forward_backward(const MicroBatch&, double, bool, PhaseTimes&) override {
    throw std::logic_error("the pipeline runs a step's micro-batches together: call run_batch()");
  }
  std::map<std::string, double> step_stats() const override { return pipeline_.stats(); }

  double finish_gradients() override {
    const auto t0 = std::chrono::steady_clock::now();
    std::map<std::string, torch::Tensor*> grads;
    for (auto& [name, p] : parameters_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads[name] = &p.mutable_grad();
    }
    Group& pp = pipeline_.pp();
    if (pp.size() > 1) {
      // A tied parameter's gradient has a part from stage 0 and one from the head: sum them
      // (ranks between hold neither and add zeros).
      for (const std::string& name : pipeline_.tied()) {
        torch::Tensor g = grads.count(name) ? *grads[name]
                                            : torch::zeros(tied_shapes_.at(name), model_->named_parameters()[name].options());
        all_reduce(pp, g).wait();
      }
    }
    std::vector<torch::Tensor> dp_grads;
    for (auto& [name, p] : parameters_) {
      if (planted_bugs().scale_grad_rank == pipeline_.dp_rank()) p.mutable_grad().mul_(planted_bugs().scale_grad_factor);  // on purpose
      dp_grads.push_back(p.grad());
    }
    sum_gradients_in_buckets(pipeline_.dp(), dp_grads, bucket_cap_bytes_);
    return seconds_since(t0);
  }

  NamedTensors full_tensors(Held what) override {
    const NamedTensors held = held_tensors(parameters_, what);
    const NamedTensors whole = pipeline_.tp() ? full_tp_parameters(*pipeline_.tp(), shards_, held) : held;
    return pipeline_.full_tensors(std::map<std::string, torch::Tensor>(whole.begin(), whole.end()), device_);
  }

  void save_state(const std::string& dir) override {
    // Each stage's parameters (or TP slices), their rows split over the stage's data-parallel
    // replicas, so every rank writes its own slice and nothing is gathered; a tied parameter
    // by the stage that owns it, a replicated one by TP rank 0.
    TpCheckpointWriter writer;
    const int64_t d = pipeline_.dp().rank(), replicas = pipeline_.dp().size();
    for (const auto& [name, p] : parameters_) {
      if (!pipeline_.owns(name) || (!shards_.count(name) && pipeline_.tp_rank() != 0)) continue;
      const int64_t rows = p.size(0), begin = rows * d / replicas, end = rows * (d + 1) / replicas;
      std::optional<AdamWState> part;
      auto s = optimizer_->state().find(name);
      if (s != optimizer_->state().end()) {
        part = AdamWState{s->second.step, s->second.exp_avg.narrow(0, begin, end - begin),
                          s->second.exp_avg_sq.narrow(0, begin, end - begin)};
      }
      writer.add(shards_, name, p.sizes().vec(), begin, end, p.detach().narrow(0, begin, end - begin),
                 part ? &*part : nullptr);
    }
    writer.write(dir, world_->world(), pipeline_.full_shapes(), *config_);
  }

  // Any checkpoint (single-device format or shards): each rank reads its stages' tensors (its
  // TP slices of them).
  void load_state(const std::string& dir) override {
    load_tp_checkpoint(dir, shards_, parameters_, optimizer_->state(), pipeline_.full_shapes());
  }

 protected:
  double grad_norm_sq() const override {
    // Stages hold disjoint parameters except a tied one, which its owner counts, and TP slices
    // are disjoint (a replicated parameter counted by TP rank 0); the dp replicas hold the same
    // gradients after the all-reduce, so only dp rank 0's are counted.
    std::vector<std::pair<std::string, torch::Tensor>> grads;
    for (const auto& [name, p] : parameters_) {
      if (pipeline_.owns(name) && pipeline_.dp_rank() == 0) grads.emplace_back(name, p.grad());
    }
    return sharded_grad_norm_sq(grads, shards_, pipeline_.tp_rank(), world_->world());
  }

 private:
  PpOptions options_;
  Pipeline pipeline_;
  std::unique_ptr<StageRunner> runner_;
  const models::ModelConfig* config_ = nullptr;
  models::ParameterShards shards_;  // TP-split parameters (none without --tp)
  std::map<std::string, std::vector<int64_t>> tied_shapes_;  // this rank's slice of each tied parameter
  int64_t bucket_cap_bytes_ = 0;  // the dp replicas' gradient sum goes in DDP's buckets
};

// Each stage sharded over the dp group by FSDP: this rank's units are its stages' (root,
// embeddings, blocks, head as fsdp_strategy.h cuts them), the executor runs each piece through
// its unit, and each unit's gradients are reduce-scattered once per step, after the unit's last
// backward (the micro-batches before accumulate them unsharded, as FSDP's --grad-accum does).
class PpFsdpStrategy : public FsdpStrategy, private StageRunner {
 public:
  PpFsdpStrategy(PpOptions options, const FsdpOptions& fsdp) : FsdpStrategy(fsdp), options_(std::move(options)) {}
  void setup(const StrategyContext& c) override {
    pipeline_.plan(c, options_);
    world_ = &c.world.world();
    setup_on(c, pipeline_.dp(), pipeline_.tensor_parallel(), pipeline_.pieces());
    shards_ = models::parameter_shards(*model_);
    for (int stage : pipeline_.my_stages()) stage_units_[stage] = units_of(stage);
    if (root_ < 0 && !pipeline_.tied().empty()) {
      // A middle stage adds zeros to the tied gradients' sum over the pipeline: the size of
      // the root unit's shard on the first and last stage.
      ParameterShapes tied;  // this rank's TP slices of them (the skeleton's shapes)
      for (const auto& item : model_->named_parameters()) {
        if (pipeline_.tied().count(item.key())) tied.emplace_back(item.key(), item.value().sizes().vec());
      }
      tied_zeros_ = torch::zeros({make_unit_layout("root", tied, pipeline_.dp().size()).shard_numel},
                                 torch::TensorOptions().dtype(c.dtype).device(fsdp_options().cpu_offload ? torch::kCPU : c.device));
    }
    // Activations travel in the dtype the units compute in (--mp-param-dtype).
    pipeline_.start(*model_, *this, c.device, model_->parameters().front().scalar_type());
  }
  double run_batch(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times) override {
    return pipeline_.run_batch(micro, loss_scale, times);
  }
  double forward_backward(const MicroBatch&, double, bool, PhaseTimes&) override {
    throw std::logic_error("the pipeline runs a step's micro-batches together: call run_batch()");
  }
  std::map<std::string, double> step_stats() const override {
    std::map<std::string, double> stats = FsdpStrategy::step_stats();
    for (const auto& [key, value] : pipeline_.stats()) stats[key] = value;
    return stats;
  }

  double finish_gradients() override {
    double waited = FsdpStrategy::finish_gradients();
    if (pipeline_.pp().size() == 1 || pipeline_.tied().empty()) return waited;
    // The tied parameters' rows (the root unit's shard) on the first and the last stage: sum
    // their two gradients over the pipeline.
    const auto t0 = std::chrono::steady_clock::now();
    torch::Tensor g = root_ >= 0 ? units_[root_]->flat_shard_grad() : tied_zeros_.zero_();
    all_reduce(pipeline_.pp(), g).wait();
    return waited + seconds_since(t0);
  }

  NamedTensors full_tensors(Held what) override {
    std::map<std::string, torch::Tensor> slices = gather_units(what);
    if (!pipeline_.tp()) return pipeline_.full_tensors(slices, torch::kCPU);
    const NamedTensors whole = full_tp_parameters(*pipeline_.tp(), shards_, NamedTensors(slices.begin(), slices.end()));
    return pipeline_.full_tensors(std::map<std::string, torch::Tensor>(whole.begin(), whole.end()), torch::kCPU);
  }

  // Each rank's FSDP rows of its stages' parameters (or TP slices); a tied one by the first
  // stage's ranks, a replicated one by TP rank 0.
  void save_state(const std::string& dir) override {
    save_blocks(dir, *world_, pipeline_.full_shapes(), shards_, [&](const std::string& name) {
      return pipeline_.owns(name) && (shards_.count(name) || pipeline_.tp_rank() == 0);
    });
  }
  void load_state(const std::string& dir) override { load_blocks(dir, pipeline_.full_shapes(), shards_); }

 protected:
  double grad_norm_sq() override {
    // FSDP rows over dp, TP slices over tp and stages over pp are disjoint: the squares add
    // over the world, a tied parameter's counted by the first stage only, a replicated one's
    // by TP rank 0.
    std::vector<std::pair<std::string, torch::Tensor>> grads;
    for (const auto& unit : units_) {
      for (size_t i = 0; i < unit->layout().parameters.size(); ++i) {
        const std::string& name = unit->layout().parameters[i].name;
        if (pipeline_.owns(name)) grads.emplace_back(name, unit->owned_grad_rows(i));
      }
    }
    return sharded_grad_norm_sq(grads, shards_, pipeline_.tp_rank(), *world_);
  }

 private:
  // StageRunner: each piece through its unit.
  torch::Tensor embed(const torch::Tensor& tokens) override { return run_embeddings(tokens); }
  torch::Tensor block(int64_t i, const torch::Tensor& hidden) override { return run_block(i, hidden); }
  torch::Tensor head(const torch::Tensor& hidden) override { return run_head(hidden); }
  void begin_step(int microbatches) override {
    // Each unit's backwards this step: one per micro-batch of every stage of this rank using it.
    backwards_left_.assign(units_.size(), 0);
    for (const auto& [stage, units] : stage_units_) {
      for (int u : units) backwards_left_[u] += microbatches;
    }
  }
  void before_forward(int stage) override { enter(stage); }
  void before_backward(int stage) override {
    for (int u : stage_units_.at(stage)) expect_backward(u, --backwards_left_[u] == 0);
    enter(stage);
  }
  // Prefetch inside the stage only; the root (a tied embedding) is gathered for the stage's
  // whole forward or backward, as FSDP gathers it for the whole step.
  void enter(int stage) {
    const std::vector<int>& units = stage_units_.at(stage);
    int first = -1, last = -1;
    bool root = false;
    for (int u : units) {
      if (u == root_) {
        root = true;
        continue;
      }
      first = first < 0 ? u : std::min(first, u);
      last = std::max(last, u);
    }
    limit_prefetch(first, last);
    if (root) gather(root_);
  }
  std::vector<int> units_of(int stage) const {
    std::vector<int> units;
    const bool first = stage == 0, last = stage == pipeline_.stages() - 1;
    if ((first || last) && root_ >= 0) units.push_back(root_);
    if (first && embeddings_ >= 0) units.push_back(embeddings_);
    for (int64_t i = pipeline_.split().begin(stage); i < pipeline_.split().end(stage); ++i) {
      if (blocks_.at(i) >= 0) units.push_back(blocks_[i]);
    }
    if (last && head_ >= 0) units.push_back(head_);
    return units;
  }

  PpOptions options_;
  Pipeline pipeline_;
  Group* world_ = nullptr;
  models::ParameterShards shards_;               // TP-split parameters (none without --tp)
  std::map<int, std::vector<int>> stage_units_;  // this rank's stages: their units
  std::vector<int> backwards_left_;              // per unit, this step
  torch::Tensor tied_zeros_;
};

}  // namespace

std::unique_ptr<Strategy> make_pp_strategy(const PpOptions& pp, const FsdpOptions& fsdp, const ParallelDims& dims) {
  // FSDP's flags are refused with --dp-replicate (strategy_registry.cpp).
  if (dims.dp_replicate) return std::make_unique<PpStrategy>(pp);
  // The world size decides whether there is a data-parallel dimension to shard over.
  if (dims.dp() > 1) return std::make_unique<PpFsdpStrategy>(pp, fsdp);
  const std::string flag = fsdp.changed_flag();
  if (!flag.empty()) {
    throw UsageError(flag + " tunes FSDP on the data-parallel ranks, but --pp " + std::to_string(dims.pp) +
                     (dims.tp > 1 ? " x --tp " + std::to_string(dims.tp) : "") + " on " + std::to_string(dims.world) +
                     " ranks leaves none");
  }
  return std::make_unique<PpStrategy>(pp);
}

}  // namespace ddx::train
