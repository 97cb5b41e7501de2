// Layout-independent initialisation and build_model().
//
// Each row (index along dim 0) of each parameter is drawn from its own counter-based stream
// keyed by (seed, parameter name, row). A rank that owns rows [a, b) of a parameter generates
// exactly those rows, bit-identical to the same rows of the single-device model, without
// materialising the rest; and the result is independent of thread count and device.
//
// Stream: splitmix64 (a counter passed through a bijective mixer), two 53-bit uniforms per
// Box-Muller pair. Constructing a torch generator per row would cost microseconds each; this
// costs ~20 ns per value and needs no state beyond the counter.
#include <ATen/Parallel.h>

#include <cmath>

#include "ddx/checksum.h"
#include "models/causal_lm.h"
#include "models/layers.h"
#include "models/parallel_layers.h"
#include "ddx/text/text.h"

namespace ddx::models {
namespace {

enum class InitKind { Normal, Zeros, Ones };
struct InitRule {
  InitKind kind = InitKind::Normal;
  double std = 0.0;
};

// Zeros for biases, ones for norm weights, N(0, init_std) otherwise. GPT-2 scales the weights
// of the two projections that write into the residual stream by 1/sqrt(2 * n_layer), so the
// residual's variance does not grow with depth (GPT-2 paper, section 2.3). Llama follows HF
// LlamaPreTrainedModel: plain init_std everywhere.
InitRule init_rule(const ModelConfig& c, const std::string& name) {
  if (ends_with(name, ".bias")) return {InitKind::Zeros};
  if (c.family == Family::Gpt2) {
    if (ends_with(name, "ln_1.weight") || ends_with(name, "ln_2.weight") || ends_with(name, "ln_f.weight"))
      return {InitKind::Ones};
    if (ends_with(name, "attn.c_proj.weight") || ends_with(name, "mlp.c_proj.weight"))
      return {InitKind::Normal, c.init_std / std::sqrt(2.0 * static_cast<double>(c.num_layers))};
    return {InitKind::Normal, c.init_std};
  }
  if (ends_with(name, "norm.weight")) return {InitKind::Ones};
  return {InitKind::Normal, c.init_std};
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Fills `out[0, width)` with N(0, std) values of the stream keyed by `key`.
void fill_normal_row(uint64_t key, double std, float* out, int64_t width) {
  uint64_t counter = key;
  auto next = [&counter] { return mix64(counter += kGolden); };
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t j = 0; j < width; j += 2) {
    const double u1 = static_cast<double>((next() >> 11) + 1) * 0x1p-53;  // (0, 1]: log is finite
    const double u2 = static_cast<double>(next() >> 11) * 0x1p-53;        // [0, 1)
    const double radius = std * std::sqrt(-2.0 * std::log(u1));
    out[j] = static_cast<float>(radius * std::cos(kTwoPi * u2));
    if (j + 1 < width) out[j + 1] = static_cast<float>(radius * std::sin(kTwoPi * u2));
  }
}

}  // namespace

torch::Tensor init_parameter(const ModelConfig& config, const std::string& name,
                             const std::vector<int64_t>& full_shape, uint64_t seed,
                             int64_t row_begin, int64_t row_end) {
  TORCH_CHECK(!full_shape.empty(), "init_parameter(", name, "): a parameter needs at least one dimension");
  TORCH_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= full_shape[0], "init_parameter(", name,
              "): rows [", row_begin, ", ", row_end, ") outside dim 0 of size ", full_shape[0]);
  std::vector<int64_t> shape = full_shape;
  shape[0] = row_end - row_begin;
  const InitRule rule = init_rule(config, name);
  if (rule.kind == InitKind::Zeros) return torch::zeros(shape, torch::kFloat32);
  if (rule.kind == InitKind::Ones) return torch::ones(shape, torch::kFloat32);

  torch::Tensor out = torch::empty(shape, torch::kFloat32);
  int64_t width = 1;
  for (size_t d = 1; d < full_shape.size(); ++d) width *= full_shape[d];
  const uint64_t name_key = mix64(mix64(seed + kGolden) ^ fnv1a64(name));
  float* data = out.data_ptr<float>();
  // Rows are independent streams, so splitting them across threads changes nothing.
  at::parallel_for(row_begin, row_end, std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row)
                       fill_normal_row(mix64(name_key ^ mix64(static_cast<uint64_t>(row))), rule.std,
                                       data + (row - row_begin) * width, width);
                   });
  return out;
}

namespace {

// This rank's slice of a tensor-parallel parameter: its row ranges drawn directly; a column
// slice (row-parallel weights) draws whole rows and keeps its columns, since the streams are
// per row.
torch::Tensor init_shard(const ModelConfig& config, const std::string& name, const ParameterShard& shard,
                         uint64_t seed) {
  std::vector<torch::Tensor> parts;
  for (const Range& r : shard.ranges) {
    if (shard.dim == 0) {
      parts.push_back(init_parameter(config, name, shard.full_shape, seed, r.begin, r.end));
    } else {
      parts.push_back(init_parameter(config, name, shard.full_shape, seed, 0, shard.full_shape[0])
                          .narrow(shard.dim, r.begin, r.size()));
    }
  }
  return torch::cat(parts, shard.dim);
}

std::shared_ptr<CausalLM> make_model(const ModelConfig& config, const TensorParallel& tp,
                                     const torch::TensorOptions& options) {
  return config.family == Family::Gpt2 ? detail::make_gpt2(config, tp, options)
                                       : detail::make_llama(config, tp, options);
}

}  // namespace

std::shared_ptr<CausalLM> build_model(const ModelConfig& config, uint64_t seed, torch::Device device,
                                      torch::Dtype dtype, const TensorParallel& tp) {
  validate(config);
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  std::shared_ptr<CausalLM> model = make_model(config, tp, options);
  const ParameterShards shards = parameter_shards(*model);
  torch::NoGradGuard no_grad;
  for (auto& param : model->named_parameters()) {
    const auto shape = param.value().sizes().vec();
    auto shard = shards.find(param.key());
    param.value().copy_(shard != shards.end() ? init_shard(config, param.key(), shard->second, seed)
                                              : init_parameter(config, param.key(), shape, seed, 0, shape[0]));
  }
  return model;
}

std::shared_ptr<CausalLM> build_model_skeleton(const ModelConfig& config, torch::Device device, torch::Dtype dtype,
                                               const TensorParallel& tp) {
  validate(config);
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  detail::SkeletonScope skeleton;
  return make_model(config, tp, options);
}

std::shared_ptr<CausalLM> build_model_skeleton(const ModelConfig& config, torch::Device device, torch::Dtype dtype) {
  return build_model_skeleton(config, device, dtype, TensorParallel{});
}

LossSum CausalLM::loss_sum(const torch::Tensor& logits, const torch::Tensor& labels) const {
  RECORD_USER_SCOPE("ddx::loss");
  return vocab_parallel_loss_sum(logits, labels, shard_range(config_.vocab_size, tp_.size(), tp_.rank(), "a vocabulary"),
                                 tp_);
}

}  // namespace ddx::models
