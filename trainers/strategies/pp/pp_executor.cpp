#include "strategies/pp/pp_executor.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "observe/phase_timer.h"
#include "strategies/planted_bugs.h"
#include "ddx/text/clock_time.h"

namespace ddx::train {
namespace {

class ModelStages : public StageRunner {
 public:
  explicit ModelStages(models::CausalLM& model) : model_(model) {}
  torch::Tensor embed(const torch::Tensor& tokens) override { return model_.embed(tokens); }
  torch::Tensor block(int64_t i, const torch::Tensor& hidden) override { return model_.block(i, hidden); }
  torch::Tensor head(const torch::Tensor& hidden) override { return model_.head(hidden); }

 private:
  models::CausalLM& model_;
};

}  // namespace

std::unique_ptr<StageRunner> run_on_model(models::CausalLM& model) { return std::make_unique<ModelStages>(model); }

PipelineExecutor::PipelineExecutor(models::CausalLM& model, StageRunner& runner, Group& pp, const ScheduleKind& kind, StageSplit split,
                                   int virtual_stages, torch::Device device, torch::Dtype activation_dtype)
    : model_(model),
      runner_(runner),
      pp_(pp),
      kind_(kind),
      split_(std::move(split)),
      virtual_stages_(virtual_stages),
      device_(device),
      activation_dtype_(activation_dtype) {}

PipeShape PipelineExecutor::shape(int microbatches) const {
  PipeShape s;
  s.ranks = pp_.size();
  s.virtual_stages = virtual_stages_;
  s.microbatches = microbatches;
  s.rank = pp_.rank();
  return s;
}

int64_t PipelineExecutor::bytes_of(const Saved& saved) {
  int64_t bytes = 0;
  for (const torch::Tensor* t : {&saved.input, &saved.output}) {
    if (t->defined() && t->dim() > 0) bytes += t->numel() * static_cast<int64_t>(t->element_size());  // not the loss
  }
  return bytes;
}

// One tag per (micro-batch, receiving stage, direction): Gloo matches a receive to the send with
// its tag, so the order in which two stages exchange tensors cannot pair the wrong ones.
int PipelineExecutor::tag(int microbatch, int stage, bool gradient) const {
  return (microbatch * split_.stages() + stage) * 2 + (gradient ? 1 : 0);
}

void PipelineExecutor::send(const torch::Tensor& t, int to_stage, int tag, std::vector<PipeEvent>& events,
                            int microbatch, double now) {
  torch::Tensor payload = t.detach().contiguous();
  if (rank_of(to_stage) == pp_.rank()) {
    local_[tag] = payload;
    return;
  }
  sends_.emplace_back(ddx::send(pp_, payload, rank_of(to_stage), tag), payload);
  events.push_back({PipeEvent::Kind::Send, microbatch, to_stage, now, now});
}

void PipelineExecutor::recv(torch::Tensor& t, int from_stage, int tag, std::vector<PipeEvent>& events,
                            int microbatch, double& waited, const std::chrono::steady_clock::time_point& start) {
  if (rank_of(from_stage) == pp_.rank()) {
    t = local_.at(tag);
    local_.erase(tag);
    return;
  }
  const double begin = seconds_since(start);
  ddx::recv(pp_, t, rank_of(from_stage), tag).wait();
  const double end = seconds_since(start);
  waited += end - begin;
  events.push_back({PipeEvent::Kind::Recv, microbatch, from_stage, begin, end});
}

double PipelineExecutor::run(const std::vector<MicroBatch>& micro, double loss_scale, PhaseTimes& times,
                             std::vector<PipeEvent>& events) {
  const auto start = std::chrono::steady_clock::now();
  const PipeShape s = shape(static_cast<int>(micro.size()));
  const int last = split_.stages() - 1;
  const std::string step = CallSite::current();
  double loss_sum = 0;
  peak_ = {};
  runner_.begin_step(s.microbatches);
  for (const PipeAction& a : kind_.make(s)) {
    const int stage = s.stage_of(a.chunk), mb = a.microbatch;
    const MicroBatch& batch = micro.at(mb);
    const bool forward = a.kind == PipeAction::Kind::Forward;
    CallSite site(step + " micro " + std::to_string(mb) + (forward ? " forward" : " backward") + " stage " +
                  std::to_string(stage));
    if (forward) {
      Saved saved;
      if (stage > 0) {
        saved.input = torch::empty({batch.inputs.size(0), batch.inputs.size(1), model_.config().hidden_size},
                                   torch::TensorOptions().dtype(activation_dtype_).device(device_));
        recv(saved.input, stage - 1, tag(mb, stage, false), events, mb, times.comm_wait, start);
        saved.input.requires_grad_(true);
      }
      const double begin = seconds_since(start);
      {
        PhaseTimer t(times.forward, device_, profile_scope::kForward);
        runner_.before_forward(stage);
        torch::Tensor h = stage == 0 ? runner_.embed(batch.inputs) : saved.input;
        for (int64_t i = split_.begin(stage); i < split_.end(stage); ++i) h = runner_.block(i, h);
        if (stage == last) {
          models::LossSum loss = model_.loss_sum(runner_.head(h), batch.labels);
          loss_sum += loss.sum.item<double>();
          h = loss.sum * loss_scale;
        }
        saved.output = h;
      }
      events.push_back({PipeEvent::Kind::Forward, mb, stage, begin, seconds_since(start)});
      if (stage < last) send(saved.output, stage + 1, tag(mb, stage + 1, false), events, mb, seconds_since(start));
      saved_bytes_ += bytes_of(saved);
      saved_[{mb, stage}] = std::move(saved);
      peak_.microbatches = std::max(peak_.microbatches, static_cast<int>(saved_.size()));
      peak_.bytes = std::max(peak_.bytes, saved_bytes_);
      continue;
    }
    Saved saved = std::move(saved_.at({mb, stage}));
    saved_.erase({mb, stage});
    saved_bytes_ -= bytes_of(saved);
    torch::Tensor grad;
    if (stage < last) {
      grad = torch::empty_like(saved.output);
      recv(grad, stage + 1, tag(mb, stage, true), events, mb, times.comm_wait, start);
    }
    const double begin = seconds_since(start);
    {
      PhaseTimer t(times.backward, device_, profile_scope::kBackward);
      runner_.before_backward(stage);
      if (stage == last) {
        // The parity self-test's planted bug: micro-batch 0 back-propagated twice.
        if (planted_bugs().pp_double_microbatch && mb == 0) saved.output.backward({}, /*retain_graph=*/true);
        saved.output.backward();
      } else {
        torch::autograd::backward({saved.output}, {grad});
      }
    }
    events.push_back({PipeEvent::Kind::Backward, mb, stage, begin, seconds_since(start)});
    if (stage > 0) send(saved.input.grad(), stage - 1, tag(mb, stage - 1, true), events, mb, seconds_since(start));
  }
  const double begin = seconds_since(start);
  for (auto& [work, tensor] : sends_) work.wait();
  sends_.clear();
  times.comm_wait += seconds_since(start) - begin;
  return loss_sum;
}

}  // namespace ddx::train
