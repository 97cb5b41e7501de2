#include "strategies/pp/pp_pipeline.h"

#include <algorithm>
#include <chrono>

#include "ddx/collectives.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "strategies/parallel_mesh.h"
#include "strategies/pp/pp_trace.h"
#include "strategies/tp/tp_state.h"
#include "strategies/planted_bugs.h"

namespace ddx::train {
namespace {

// One-line errors for stages the model or the step cannot take (the degrees divide the world:
// parallel_dims.cpp checked them).
void check_layout(const StrategyContext& c, const PpOptions& o, int pp, const ScheduleKind& kind) {
  const std::string n = std::to_string(pp);
  const int64_t stages = pp * o.virtual_stages;
  if (stages > c.model.num_layers) {
    throw UsageError((o.virtual_stages > 1 ? "--pp " + n + " x --pp-virtual-stages " +
                                                    std::to_string(o.virtual_stages) + " = " +
                                                    std::to_string(stages) + " stages"
                                              : "--pp " + n) +
                     " exceeds the " + std::to_string(c.model.num_layers) + " blocks of model " + c.model.name);
  }
  const int64_t m = o.microbatches * c.run.grad_accum;
  if (kind.interleaved && m % pp != 0) {
    throw UsageError("--pp-schedule " + kind.name + " needs the step's micro-batches (--microbatches x --grad-accum = " +
                     std::to_string(m) + ") to be a multiple of --pp " + n);
  }
}

}  // namespace

void Pipeline::plan(const StrategyContext& c, const PpOptions& o) {
  const int pp = c.dims.pp;
  kind_ = &find_schedule(o.schedule);
  check_layout(c, o, pp, *kind_);
  // pp x dp (x tp), TP innermost and the pipeline outermost (parallel_mesh.h).
  const ParallelMesh mesh = build_parallel_mesh(c);
  pp_ = mesh.pp;
  dp_ = mesh.dp;
  tp_ = mesh.tp;
  dp_rank_ = mesh.dp_rank;
  microbatches_ = o.microbatches;
  trace_path_ = o.trace;
  num_layers_ = static_cast<int>(c.model.num_layers);
  virtual_stages_ = static_cast<int>(o.virtual_stages);
  const int stages = pp * virtual_stages_;

  // Shapes only: which piece each parameter belongs to (-1 embedding, num_layers head, else its
  // block) and how many elements each piece has.
  std::shared_ptr<models::CausalLM> model = models::build_model_skeleton(c.model, c.device, c.dtype);
  std::map<const void*, std::string> name_of;
  std::map<std::string, int64_t> numel;
  for (const auto& item : model->named_parameters()) {
    name_of[item.value().unsafeGetTensorImpl()] = item.key();
    full_shapes_.emplace_back(item.key(), item.value().sizes().vec());
    numel[item.key()] = item.value().numel();
  }
  std::map<std::string, int64_t> unit;
  std::vector<int64_t> block_params(num_layers_, 0);
  for (int64_t i = 0; i < num_layers_; ++i) {
    for (const auto& p : model->block_module(i)->parameters()) {
      unit[name_of.at(p.unsafeGetTensorImpl())] = i;
      block_params[i] += p.numel();
    }
  }
  int64_t embedding_params = 0, head_params = 0;
  for (const std::string& name : model->embedding_parameter_names()) {
    unit[name] = -1;
    embedding_params += numel.at(name);
  }
  for (const std::string& name : model->head_parameter_names()) {
    unit[name] = num_layers_;
    head_params += numel.at(name);
  }
  for (const std::string& name : model->tied_parameter_names()) {
    tied_.insert(name);
    head_params += numel.at(name);  // the head multiplies by it too
  }
  split_ = o.split.empty() ? balanced_split(block_params, embedding_params, head_params, stages)
                           : manual_split(o.split, num_layers_, stages);
  // Stage s lives on pipeline rank s mod p.
  for (const auto& [name, shape] : full_shapes_) {
    const int64_t u = unit.at(name);
    int stage = u < 0 ? 0 : u == num_layers_ ? stages - 1 : 0;
    while (u >= 0 && u < num_layers_ && split_.end(stage) <= u) ++stage;
    owner_[name] = stage % pp;
  }
  if (c.world.rank() == 0) {
    log::info("pipeline: ", mesh.describe(), "; ", stages, " stages (blocks ", split_.describe(), "), --pp-schedule ",
              kind_->name, ", ", o.microbatches * c.run.grad_accum, " micro-batches per step");
  }
}

models::TensorParallel Pipeline::tensor_parallel() const {
  models::TensorParallel split{tp_, false};
  split.test_skip_input_reduce = tp_ != nullptr && planted_bugs().tp_no_input_reduce;
  return split;
}

void Pipeline::start(models::CausalLM& model, StageRunner& runner, torch::Device device, torch::Dtype activations) {
  full_dtype_ = full_dtype(activations);
  executor_ = std::make_unique<PipelineExecutor>(model, runner, *pp_, *kind_, split_, virtual_stages_, device,
                                                 activations);
}

std::vector<int> Pipeline::my_stages() const {
  std::vector<int> out;
  for (int s = pp_->rank(); s < stages(); s += pp_->size()) out.push_back(s);
  return out;
}

bool Pipeline::holds(const std::string& name) const {
  const int last_rank = (stages() - 1) % pp_->size();
  return owns(name) || (tied_.count(name) && pp_->rank() == last_rank);
}

FsdpPieces Pipeline::pieces() const {
  FsdpPieces pieces;
  pieces.blocks.assign(num_layers_, false);
  pieces.embeddings = pieces.head = false;
  for (int s : my_stages()) {
    for (int64_t i = split_.begin(s); i < split_.end(s); ++i) pieces.blocks[i] = true;
    pieces.embeddings = pieces.embeddings || s == 0;
    pieces.head = pieces.head || s == stages() - 1;
  }
  return pieces;
}

std::vector<MicroBatch> Pipeline::pipeline_microbatches(const std::vector<MicroBatch>& micro) const {
  std::vector<MicroBatch> out;
  for (const MicroBatch& batch : micro) {
    auto inputs = batch.inputs.chunk(microbatches_, 0);
    auto labels = batch.labels.chunk(microbatches_, 0);
    for (int64_t i = 0; i < microbatches_; ++i) out.push_back({inputs[i], labels[i]});
  }
  return out;
}

double Pipeline::run_batch(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times) {
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

void Pipeline::measure(const std::vector<PipeEvent>& events, int microbatches) {
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

NamedTensors Pipeline::full_tensors(const std::map<std::string, torch::Tensor>& held, torch::Device device) {
  NamedTensors out;
  const auto options = torch::TensorOptions().dtype(full_dtype_).device(device);
  for (const auto& [name, shape] : full_shapes_) {
    const int owner = owner_.at(name);
    torch::Tensor t = owner == pp_->rank() ? held.at(name).detach().to(options).clone() : torch::empty(shape, options);
    if (pp_->size() > 1) broadcast(*pp_, t, owner).wait();
    out.emplace_back(name, t.to(torch::kCPU));
  }
  return out;
}

}  // namespace ddx::train
