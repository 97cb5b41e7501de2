#include "train/adamw.h"

#include <cmath>

namespace ddx::train {

void AdamW::update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, double lr) {
  torch::NoGradGuard no_grad;
  AdamWState& s = state_[name];
  if (!s.exp_avg.defined()) {
    s.exp_avg = torch::zeros_like(param, torch::MemoryFormat::Preserve);
    s.exp_avg_sq = torch::zeros_like(param, torch::MemoryFormat::Preserve);
  }
  s.step += 1;
  const double beta1 = config_.beta1, beta2 = config_.beta2;
  param.mul_(1.0 - lr * config_.weight_decay);
  s.exp_avg.lerp_(grad, 1.0 - beta1);
  s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(s.step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(s.step));
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  torch::Tensor denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(config_.eps);
  param.addcdiv_(s.exp_avg, denom, -step_size);
}

}  // namespace ddx::train
