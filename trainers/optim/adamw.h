#pragma once
// AdamW with decoupled weight decay, on named tensors. ddx owns its optimizer (rather than
// torch::optim::AdamW) because every strategy updates something different — full parameters,
// a rank's subset (ZeRO-1), flat shards (FSDP) — and because checkpoints must key state by
// parameter name. The math is element-wise and follows torch.optim.AdamW's single-tensor path
// operation by operation, so a shard's update is bit-identical to the same slice of the full one.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace ddx::train {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // at::_fused_adamw_ (torch.optim.AdamW(fused=True)): one kernel per tensor, several times
  // faster on CPU, but it rounds differently in the last bit, so it is opt-in (--fused-adamw)
  // and the parity suite checks it within its tolerance.
  bool fused = false;
};

struct AdamWState {
  int64_t step = 0;
  torch::Tensor exp_avg;
  torch::Tensor exp_avg_sq;
};

// Adds the squared L2 norm of `grad` to `total`, summed in float64 over float32 norms of chunks
// of at most AdamW's chunk size. A float32 norm of a whole large tensor is off by ~1e-3 (GPT-2's
// 38.6M-element embedding gradient: 2.7e-3 relative; by chunks 5e-7), and every strategy's
// gradient norm goes through here, so they agree with each other and with AdamW::update's.
void add_squared_norm(const torch::Tensor& grad, double& total);

class AdamW {
 public:
  explicit AdamW(AdamWConfig config) : config_(config) {}

  // One update of `param` from `grad` (same shape), creating the state on first use. With
  // `grad_norm_sq`, also does add_squared_norm(grad, *grad_norm_sq) (the same sum), reading each
  // chunk of the gradient while it is in cache for the update rather than in a pass of its own.
  void update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, double lr,
              double* grad_norm_sq = nullptr);

  std::map<std::string, AdamWState>& state() { return state_; }
  const std::map<std::string, AdamWState>& state() const { return state_; }
  const AdamWConfig& config() const { return config_; }

 private:
  AdamWConfig config_;
  std::map<std::string, AdamWState> state_;
};

}  // namespace ddx::train
