#include "strategies/replicated/replicated_strategy.h"

#include <chrono>
#include <cmath>

#include "checkpoint/sharded_checkpoint.h"
#include "models/hf_checkpoint.h"
#include "observe/phase_timer.h"

namespace ddx::train {

void ReplicatedStrategy::setup(const StrategyContext& c) {
  build(c, {});
  norm_in_update_ = true;
}

void ReplicatedStrategy::build(const StrategyContext& c, const models::TensorParallel& tp) {
  world_ = &c.world;
  device_ = c.device;
  model_ = models::build_model(c.model, c.run.seed, c.device, c.dtype, tp);
  if (!c.run.init_from.empty()) models::load_hf_weights(*model_, c.run.init_from);
  for (auto& item : model_->named_parameters()) parameters_.emplace_back(item.key(), item.value());
  AdamWConfig config;
  config.weight_decay = c.run.weight_decay;
  config.fused = c.run.fused_adamw;
  optimizer_ = std::make_unique<AdamW>(config);
}

double ReplicatedStrategy::forward_backward(const MicroBatch& batch, double loss_scale, bool,
                                            PhaseTimes& times) {
  models::LossSum loss;
  {
    PhaseTimer t(times.forward, device_, profile_scope::kForward);
    torch::Tensor logits = model_->forward(batch.inputs);
    loss = model_->loss_sum(logits, batch.labels);
  }
  {
    PhaseTimer t(times.backward, device_, profile_scope::kBackward);
    (loss.sum * loss_scale).backward();
  }
  return loss.sum.item<double>();
}

double ReplicatedStrategy::grad_norm_sq() const {
  // One pass, no temporaries (as clip_grad_norm_ does: the norm of per-tensor norms, here of
  // chunks for accuracy); computed in float32 even for bf16 gradients.
  double total = 0;
  for (const auto& [name, p] : parameters_) {
    if (p.grad().defined()) add_squared_norm(p.grad(), total);
  }
  return total;
}

void ReplicatedStrategy::zero_gradients() {
  for (auto& [name, p] : parameters_) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

void ReplicatedStrategy::apply_updates(double lr) { update_all(lr, nullptr); }

void ReplicatedStrategy::update_all(double lr, double* grad_norm_sq) {
  for (auto& [name, p] : parameters_) {
    if (!p.grad().defined()) continue;
    torch::Tensor param = p.detach();
    optimizer_->update(name, param, p.grad(), lr, grad_norm_sq);
  }
}

double ReplicatedStrategy::optimizer_step(double lr, double max_grad_norm) {
  if (norm_in_update_ && max_grad_norm <= 0) {
    // The norm is only reported: read inside the update, one pass over the gradients fewer
    // (the same sum as grad_norm_sq()'s, so a clipped run reports the same norm).
    double sq = 0;
    update_all(lr, &sq);
    zero_gradients();
    return std::sqrt(sq);
  }
  const double norm = std::sqrt(grad_norm_sq());
  if (max_grad_norm > 0) {
    // torch.nn.utils.clip_grad_norm_'s rule: scale by max/(norm + 1e-6) when that is < 1.
    const double coef = max_grad_norm / (norm + 1e-6);
    if (coef < 1.0) {
      torch::NoGradGuard no_grad;
      for (auto& [name, p] : parameters_) {
        if (p.grad().defined()) p.mutable_grad().mul_(coef);
      }
    }
  }
  apply_updates(lr);
  zero_gradients();
  return norm;
}

NamedTensors ReplicatedStrategy::full_tensors(Held what) {
  NamedTensors out;
  for (const auto& [name, p] : parameters_) {
    out.emplace_back(name, held_tensor(p, what).to(torch::kCPU, full_dtype(p.scalar_type())).clone());
  }
  return out;
}

void ReplicatedStrategy::save_state(const std::string& dir) {
  if (writes_checkpoint()) {
    write_model_file(dir + "/model.safetensors", parameters_);
    write_optimizer_file(dir + "/optimizer.safetensors", optimizer_->state());
  }
  checkpoint_barrier();
}

void ReplicatedStrategy::load_state(const std::string& dir) {
  NamedTensors targets;
  for (auto& [name, p] : parameters_) targets.emplace_back(name, p.detach());
  if (is_sharded_checkpoint(dir)) {
    // Written by FSDP: assemble the full tensors from the shards, whatever their world size.
    ParameterShapes expected;
    for (const auto& [name, t] : targets) expected.emplace_back(name, t.sizes().vec());
    auto reader = CheckpointRows::open(dir, expected);
    std::map<std::string, AdamWState> state;
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : targets) {
      t.copy_(reader->rows(name, 0, t.size(0)));
      if (auto s = reader->optimizer_rows(name, 0, t.size(0), t)) state[name] = std::move(*s);
    }
    optimizer_->state() = std::move(state);
    return;
  }
  read_model_file(dir + "/model.safetensors", targets);
  optimizer_->state() = read_optimizer_file(dir + "/optimizer.safetensors", targets, device_);
}

MemoryAccounting ReplicatedStrategy::memory() const {
  MemoryAccounting m;
  for (const auto& [name, p] : parameters_) {
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    m.parameter_bytes += bytes;
    m.gradient_bytes += bytes;
  }
  for (const auto& [name, s] : optimizer_->state()) {
    m.optimizer_bytes += 2 * s.exp_avg.numel() * static_cast<int64_t>(s.exp_avg.element_size());
  }
  return m;
}

}  // namespace ddx::train
