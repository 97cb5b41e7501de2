#include "train/pp_strategy.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "ddx/collectives.h"
#include "ddx/errors.h"
#include "ddx/log.h"
#include "train/fsdp_checkpoint.h"
#include "train/tp_state.h"
#include "train/pp_trace.h"

namespace ddx::train {
namespace {

// One-line errors for layouts the world or the model cannot take.
void check_layout(const StrategyContext& c, int pp, const ScheduleKind& kind) {
  const auto& o = c.options;
  const std::string n = std::to_string(pp);
  if (c.world.size() % pp != 0) {
    throw UsageError("--pp " + n + " does not divide the world size " + std::to_string(c.world.size()));
  }
  const int64_t stages = pp * o.pp_virtual_stages;
  if (stages > c.model.num_layers) {
    throw UsageError((o.pp_virtual_stages > 1 ? "--pp " + n + " x --pp-virtual-stages " +
                                                    std::to_string(o.pp_virtual_stages) + " = " +
                                                    std::to_string(stages) + " stages"
                                              : "--pp " + n) +
                     " exceeds the " + std::to_string(c.model.num_layers) + " blocks of model " + c.model.name);
  }
  const int64_t m = o.microbatches * o.grad_accum;
  if (kind.interleaved && m % pp != 0) {
    throw UsageError("--pp-schedule " + kind.name + " needs the step's micro-batches (--microbatches x --grad-accum = " +
                     std::to_string(m) + ") to be a multiple of --pp " + n);
  }
}

}  // namespace

void PpStrategy::setup(const StrategyContext& c) {
  const TrainOptions& o = c.options;
  const int pp = o.pp > 0 ? static_cast<int>(o.pp) : c.world.size();
  const ScheduleKind& kind = find_schedule(o.pp_schedule);
  check_layout(c, pp, kind);
  DeviceMesh& mesh = c.world.mesh({{"pp", pp}, {"dp", c.world.size() / pp}});
  pp_ = &mesh.group("pp");
  dp_ = &mesh.group("dp");
  dp_rank_ = mesh.coordinate("dp");
  microbatches_ = o.microbatches;
  config_ = &c.model;
  trace_path_ = o.pp_trace;
  // The whole model is built (layout-independent init, or --init-from), then every parameter no
  // stage of this rank uses is released.
  build(c, {});
  const models::ModelConfig& m = c.model;
  const int stages = pp * static_cast<int>(o.pp_virtual_stages);

  // Which unit each parameter belongs to: -1 embedding, num_layers head, else its block.
  std::map<const void*, std::string> name_of;
  for (const auto& [name, p] : parameters_) {
    name_of[p.unsafeGetTensorImpl()] = name;
    full_shapes_.emplace_back(name, p.sizes().vec());
  }
  std::map<std::string, int64_t> unit;
  std::vector<int64_t> block_params(m.num_layers, 0);
  for (int64_t i = 0; i < m.num_layers; ++i) {
    for (const auto& p : model_->block_module(i)->parameters()) {
      unit[name_of.at(p.unsafeGetTensorImpl())] = i;
      block_params[i] += p.numel();
    }
  }
  int64_t embedding_params = 0, head_params = 0;
  std::map<std::string, int64_t> numel;
  for (const auto& [name, p] : parameters_) numel[name] = p.numel();
  for (const std::string& name : model_->embedding_parameter_names()) {
    unit[name] = -1;
    embedding_params += numel.at(name);
  }
  for (const std::string& name : model_->head_parameter_names()) {
    unit[name] = m.num_layers;
    head_params += numel.at(name);
  }
  for (const std::string& name : model_->tied_parameter_names()) {
    tied_.insert(name);
    head_params += numel.at(name);  // the head multiplies by it too
  }
  StageSplit split = o.pp_split.empty() ? balanced_split(block_params, embedding_params, head_params, stages)
                                        : manual_split(o.pp_split, m.num_layers, stages);

  // Keep what this rank's stages use; stage s lives on pipeline rank s mod p.
  const int me = pp_->rank(), last_rank = (stages - 1) % pp;
  NamedTensors held;
  for (auto& [name, p] : parameters_) {
    const int64_t u = unit.at(name);
    int stage = u < 0 ? 0 : u == m.num_layers ? stages - 1 : 0;
    while (u >= 0 && u < m.num_layers && split.end(stage) <= u) ++stage;
    owner_[name] = stage % pp;
    const bool mine = owner_[name] == me || (tied_.count(name) && me == last_rank);
    if (mine) {
      held.emplace_back(name, p);
    } else {
      p.set_data(torch::empty({0}, p.options()));
    }
  }
  parameters_ = std::move(held);
  executor_ = std::make_unique<PipelineExecutor>(*model_, *pp_, kind, split, static_cast<int>(o.pp_virtual_stages),
                                                 c.device, c.dtype);
  if (c.world.rank() == 0) {
    log::info("pipeline: ", mesh.describe(), "; ", stages, " stages (blocks ", split.describe(), "), --pp-schedule ",
              kind.name, ", ", o.microbatches * o.grad_accum, " micro-batches per step");
  }
}

int PpStrategy::dp_rank() const { return dp_rank_; }
int PpStrategy::dp_size() const { return dp_->size(); }

double PpStrategy::forward_backward(const MicroBatch&, double, bool, PhaseTimes&) {
  throw std::logic_error("the pipeline runs a step's micro-batches together: call run_batch()");
}

std::vector<MicroBatch> PpStrategy::pipeline_microbatches(const std::vector<MicroBatch>& micro) const {
  std::vector<MicroBatch> out;
  for (const MicroBatch& batch : micro) {
    auto inputs = batch.inputs.chunk(microbatches_, 0);
    auto labels = batch.labels.chunk(microbatches_, 0);
    for (int64_t i = 0; i < microbatches_; ++i) out.push_back({inputs[i], labels[i]});
  }
  return out;
}

double PpStrategy::run_batch(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times) {
  const std::vector<MicroBatch> pipeline = pipeline_microbatches(micro);
  // Start together, so that the measured timeline shows the schedule's waits, not the skew
  // left by the previous step.
  barrier(*pp_).wait();
  std::vector<PipeEvent> events;
  double loss_sum = executor_->run(pipeline, loss_scale, times, events);
  auto loss = torch::tensor({loss_sum}, torch::kFloat64);
  broadcast(*pp_, loss, pp_->size() - 1).wait();  // the last stage (stages = pV) is on the last rank
  measure(events, static_cast<int>(pipeline.size()));
  return loss.item<double>();
}

void PpStrategy::measure(const std::vector<PipeEvent>& events, int microbatches) {
  // Bubble: the share of the pipeline's step (first start to last end over the ranks) that
  // a rank spends outside forward and backward, averaged over the ranks.
  double busy = 0, end = 0;
  for (const PipeEvent& e : events) {
    if (e.kind == PipeEvent::Kind::Forward || e.kind == PipeEvent::Kind::Backward) busy += e.end_s - e.begin_s;
    end = std::max(end, e.end_s);
  }
  const PipelineExecutor::InFlight peak = executor_->peak_in_flight();
  auto mine = torch::tensor({busy, end, static_cast<double>(peak.microbatches), static_cast<double>(peak.bytes)},
                            torch::kFloat64);
  auto all = torch::zeros({4 * pp_->size()}, torch::kFloat64);
  all_gather(*pp_, all, mine).wait();
  double span = 0, total_busy = 0;
  for (int r = 0; r < pp_->size(); ++r) {
    total_busy += all[4 * r].item<double>();
    span = std::max(span, all[4 * r + 1].item<double>());
    // Per pipeline rank: what the schedule kept alive between forwards and backwards.
    stats_["pp_peak_inflight_rank" + std::to_string(r)] = all[4 * r + 2].item<double>();
    stats_["pp_peak_activation_bytes_rank" + std::to_string(r)] = all[4 * r + 3].item<double>();
  }
  const PipeShape shape = executor_->shape(microbatches);
  stats_["pp_bubble"] = span > 0 ? 1.0 - total_busy / (span * pp_->size()) : 0.0;
  stats_["pp_bubble_theoretical"] = executor_->kind().theoretical_bubble(shape);
  if (trace_path_.empty() || dp_rank_ != 0) return;
  // Every rank's events to pipeline rank 0, as fixed-size rows of (kind, micro-batch, stage,
  // begin, end); a rank has at most 2mV actions, each with one send and one receive.
  const int64_t rows = 6 * static_cast<int64_t>(microbatches) * shape.virtual_stages;
  auto packed = torch::full({rows, 5}, -1.0, torch::kFloat64);
  for (size_t i = 0; i < events.size() && static_cast<int64_t>(i) < rows; ++i) {
    const PipeEvent& e = events[i];
    packed[i] = torch::tensor({static_cast<double>(e.kind), static_cast<double>(e.microbatch),
                               static_cast<double>(e.stage), e.begin_s, e.end_s}, torch::kFloat64);
  }
  auto gathered = torch::zeros({pp_->size() * rows * 5}, torch::kFloat64);
  all_gather(*pp_, gathered, packed.reshape({-1})).wait();
  if (pp_->rank() != 0) return;
  // Steps side by side: each step's times are shifted by the spans of the steps before it.
  trace_.resize(pp_->size());
  auto acc = gathered.accessor<double, 1>();
  for (int r = 0; r < pp_->size(); ++r) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t at = (r * rows + i) * 5;
      if (acc[at] < 0) continue;
      trace_[r].push_back({static_cast<PipeEvent::Kind>(static_cast<int>(acc[at])), static_cast<int>(acc[at + 1]),
                           static_cast<int>(acc[at + 2]), trace_offset_ + acc[at + 3], trace_offset_ + acc[at + 4]});
    }
  }
  trace_offset_ += span;
  ++traced_steps_;
  PipeTraceInfo info;
  info.schedule = executor_->kind().name;
  info.ranks = shape.ranks;
  info.virtual_stages = shape.virtual_stages;
  info.microbatches = microbatches;
  info.steps = traced_steps_;
  bubble_sum_ += stats_["pp_bubble"];
  info.bubble_measured = bubble_sum_ / traced_steps_;
  info.bubble_theoretical = stats_["pp_bubble_theoretical"];
  write_pipeline_trace(trace_path_, trace_, info);
}

double PpStrategy::finish_gradients() {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, torch::Tensor*> grads;
  for (auto& [name, p] : parameters_) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads[name] = &p.mutable_grad();
  }
  if (pp_->size() > 1) {
    // A tied parameter's gradient has a part from stage 0 and one from the head: sum them
    // (ranks between hold neither and add zeros).
    for (const std::string& name : tied_) {
      torch::Tensor g;
      if (grads.count(name)) {
        g = *grads[name];
      } else {
        const auto& shape = std::find_if(full_shapes_.begin(), full_shapes_.end(),
                                         [&](const auto& e) { return e.first == name; })->second;
        g = torch::zeros(shape, model_->named_parameters()[name].options());
      }
      all_reduce(*pp_, g).wait();
    }
  }
  if (dp_->size() > 1) {
    std::vector<torch::Tensor> parts;
    for (auto& [name, p] : parameters_) parts.push_back(p.grad().reshape({-1}));
    torch::Tensor flat = torch::cat(parts);
    all_reduce(*dp_, flat).wait();
    int64_t offset = 0;
    for (auto& [name, p] : parameters_) {
      p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double PpStrategy::grad_norm_sq() const {
  // Stages hold disjoint parameters except a tied one, which pipeline rank 0 counts.
  double local = 0;
  for (const auto& [name, p] : parameters_) {
    if (!p.grad().defined() || (tied_.count(name) && pp_->rank() != owner_.at(name))) continue;
    add_squared_norm(p.grad(), local);
  }
  auto total = torch::tensor({local}, torch::kFloat64);
  all_reduce(*pp_, total).wait();
  return total.item<double>();
}

torch::Tensor PpStrategy::from_owner(const std::string& name, const std::vector<int64_t>& shape) {
  const int owner = owner_.at(name);
  torch::Tensor param = model_->named_parameters()[name];
  torch::Tensor t = owner == pp_->rank() ? param.detach().clone()
                                         : torch::empty(shape, torch::TensorOptions().dtype(param.scalar_type()).device(device_));
  if (pp_->size() > 1) broadcast(*pp_, t, owner).wait();
  return t;
}

NamedTensors PpStrategy::full_parameters() {
  NamedTensors out;
  for (const auto& [name, shape] : full_shapes_) {
    out.emplace_back(name, from_owner(name, shape).to(torch::kCPU, torch::kFloat32));
  }
  return out;
}

void PpStrategy::save_state(const std::string& dir) {
  // Sharded (fsdp_checkpoint.h's version-2 pieces): each stage's parameters, their rows split
  // over the stage's data-parallel replicas, so every rank writes its own slice and nothing is
  // gathered; a tied parameter by the stage that owns it.
  TpCheckpointWriter writer;
  const int64_t d = dp_->rank(), replicas = dp_->size();
  for (const auto& [name, p] : parameters_) {
    if (owner_.at(name) != pp_->rank()) continue;
    const int64_t rows = p.size(0), begin = rows * d / replicas, end = rows * (d + 1) / replicas;
    std::optional<AdamWState> part;
    auto s = optimizer_->state().find(name);
    if (s != optimizer_->state().end()) {
      part = AdamWState{s->second.step, s->second.exp_avg.narrow(0, begin, end - begin),
                        s->second.exp_avg_sq.narrow(0, begin, end - begin)};
    }
    writer.add({}, name, p.sizes().vec(), begin, end, p.detach().narrow(0, begin, end - begin),
               part ? &*part : nullptr);
  }
  writer.write(dir, world_->world(), full_shapes_, *config_);
}

void PpStrategy::load_state(const std::string& dir) {
  // Any checkpoint (single-device format or FSDP shards): each rank reads its stages' tensors.
  auto reader = CheckpointRows::open(dir, full_shapes_);
  std::map<std::string, AdamWState> state;
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : parameters_) {
    p.detach().copy_(reader->rows(name, 0, p.size(0)));
    if (auto s = reader->optimizer_rows(name, 0, p.size(0), p)) state[name] = std::move(*s);
  }
  optimizer_->state() = std::move(state);
}

}  // namespace ddx::train
