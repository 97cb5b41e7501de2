// Speed without other maths (docs/performance.md): the same element-wise kernels as
// torch.optim.AdamW's single-tensor path run over cache-sized chunks of each tensor in turn, so
// the parameter, gradient and both moments come from memory once per step instead of once per
// kernel (about 3x faster on CPU than the whole-tensor sequence, and bit-identical to it, as any
// slice already is); the weight-decay multiply is skipped when it multiplies by exactly 1.
// --fused-adamw trades that exactness for at::_fused_adamw_'s single kernel per tensor.
#include "optim/adamw.h"

#include <cmath>

namespace ddx::train {
namespace {

// Elements per chunk: four float32 tensors and the scratch of 128K elements (2.5 MiB) stay in
// the last-level cache between kernels. A multiple of every vector width, so each kernel splits
// a chunk into vector and scalar parts exactly as it splits the whole tensor. (512K chunks are
// bitwise the same update with a third of the dispatches, but no faster measurably, and the
// norm by chunks is then 4e-6 off instead of 5e-7; see add_squared_norm.)
constexpr int64_t kChunk = int64_t{1} << 17;

// torch.optim.AdamW(fused=True)'s kernel on one tensor; the step count is the float32 tensor on
// the parameter's device that torch.optim keeps for it (the kernel reads it, the caller counts).
void fused_update(torch::Tensor& param, const torch::Tensor& grad, AdamWState& s, double lr, const AdamWConfig& c) {
  const torch::Tensor step = torch::full({}, static_cast<double>(s.step), param.options().dtype(torch::kFloat32));
  at::_fused_adamw_({param}, {grad}, {s.exp_avg}, {s.exp_avg_sq}, {}, {step}, lr, c.beta1, c.beta2, c.weight_decay,
                    c.eps, /*amsgrad=*/false, /*maximize=*/false);
}

// On a GPU the whole-tensor kernels already run at memory speed, and chunks would only add launches.
bool chunkable(const torch::Tensor& param, const torch::Tensor& grad, const AdamWState& s) {
  return param.is_cpu() && param.is_contiguous() && grad.is_contiguous() && s.exp_avg.is_contiguous() && s.exp_avg_sq.is_contiguous() &&
         grad.scalar_type() == param.scalar_type() && grad.sizes() == param.sizes();
}

void add_chunk_norm(const torch::Tensor& chunk, double& total) {
  const auto dtype = chunk.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const double n = torch::linalg_vector_norm(chunk, 2, c10::nullopt, false, dtype).item<double>();
  total += n * n;
}

}  // namespace

void add_squared_norm(const torch::Tensor& grad, double& total) {
  // A GPU reduces in a tree (accurate already), and each chunk would cost a synchronisation.
  if (grad.numel() <= kChunk || !grad.is_cpu() || !grad.is_contiguous()) return add_chunk_norm(grad, total);
  const torch::Tensor flat = grad.view({-1});
  for (int64_t begin = 0; begin < flat.numel(); begin += kChunk) {
    add_chunk_norm(flat.narrow(0, begin, std::min(kChunk, flat.numel() - begin)), total);
  }
}

void AdamW::update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, double lr,
                   double* grad_norm_sq) {
  torch::NoGradGuard no_grad;
  AdamWState& s = state_[name];
  if (!s.exp_avg.defined()) {
    s.exp_avg = torch::zeros_like(param, torch::MemoryFormat::Preserve);
    s.exp_avg_sq = torch::zeros_like(param, torch::MemoryFormat::Preserve);
  }
  s.step += 1;
  if (config_.fused) {
    if (grad_norm_sq) add_squared_norm(grad, *grad_norm_sq);
    fused_update(param, grad, s, lr, config_);
    return;
  }
  const double beta1 = config_.beta1, beta2 = config_.beta2;
  const double decay = 1.0 - lr * config_.weight_decay;
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(s.step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(s.step));
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  // torch.optim.AdamW's single-tensor sequence on one slice of the tensors.
  auto update_slice = [&](torch::Tensor p, const torch::Tensor& g, torch::Tensor m, torch::Tensor v, torch::Tensor denom) {
    if (decay != 1.0) p.mul_(decay);
    m.lerp_(g, 1.0 - beta1);
    v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
    at::sqrt_out(denom, v);
    denom.div_(bias_correction2_sqrt).add_(config_.eps);
    p.addcdiv_(m, denom, -step_size);
  };
  if (!chunkable(param, grad, s)) {
    if (grad_norm_sq) add_squared_norm(grad, *grad_norm_sq);
    update_slice(param, grad, s.exp_avg, s.exp_avg_sq, torch::empty_like(s.exp_avg_sq));
    return;
  }
  // One chunk of the denominator, reused for every tensor (CPU only: no device to match).
  thread_local torch::Tensor scratch;
  if (!scratch.defined() || scratch.scalar_type() != s.exp_avg_sq.scalar_type()) {
    scratch = torch::empty({kChunk}, s.exp_avg_sq.options());
  }
  torch::Tensor p = param.view({-1}), m = s.exp_avg.view({-1}), v = s.exp_avg_sq.view({-1});
  const torch::Tensor g = grad.view({-1});
  const int64_t n = p.numel();
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t len = std::min(kChunk, n - begin);
    const torch::Tensor g_chunk = g.narrow(0, begin, len);
    if (grad_norm_sq) add_chunk_norm(g_chunk, *grad_norm_sq);
    update_slice(p.narrow(0, begin, len), g_chunk, m.narrow(0, begin, len), v.narrow(0, begin, len),
                 scratch.narrow(0, 0, len));
  }
}

}  // namespace ddx::train
