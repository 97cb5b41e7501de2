// Shared building blocks: parameter holders, attention, RoPE, and the token loss.
#include "models/layers.h"

#include <cmath>

namespace ddx::models {
namespace detail {

namespace {
thread_local bool g_skeleton = false;
}

SkeletonScope::SkeletonScope() : previous_(g_skeleton) { g_skeleton = true; }
SkeletonScope::~SkeletonScope() { g_skeleton = previous_; }

torch::Tensor new_parameter(at::IntArrayRef shape, const torch::TensorOptions& options) {
  if (!g_skeleton) return torch::empty(shape, options);
  // Full sizes over an empty storage: the shape is known, no byte is allocated. FSDP points
  // the storage at its unsharded buffer only while a unit is gathered.
  torch::Tensor t = torch::empty({0}, options);
  t.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return t;
}

Embedding::Embedding(int64_t rows, int64_t dim, const torch::TensorOptions& options) {
  weight = register_parameter("weight", new_parameter({rows, dim}, options));
}

namespace {

// Carries a TiedGradient through the autograd context (saved_data holds IValues).
void keep(torch::autograd::AutogradContext* ctx, const TiedGradientPtr& tied) {
  ctx->saved_data["tied"] = c10::IValue::make_capsule(c10::static_intrusive_pointer_cast<torch::CustomClassHolder>(tied));
}
TiedGradientPtr kept(torch::autograd::AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<TiedGradient>(ctx->saved_data["tied"].toCapsule());
}

class TiedEmbeddingLookup : public torch::autograd::Function<TiedEmbeddingLookup> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight,
                               const torch::Tensor& ids, const TiedGradientPtr& tied) {
    ctx->save_for_backward({ids});
    ctx->saved_data["rows"] = weight.size(0);
    keep(ctx, tied);
    tied->lookup_in_graph = true;
    return torch::embedding(weight, ids);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    RECORD_USER_SCOPE("ddx::embedding");  // for the profile (profile_report.cpp)
    const torch::Tensor ids = ctx->get_saved_variables()[0];
    const TiedGradientPtr tied = kept(ctx);
    torch::Tensor product = std::move(tied->head_product);
    tied->head_product = torch::Tensor();
    if (!product.defined()) {
      return {at::embedding_dense_backward(grads[0], ids, ctx->saved_data["rows"].toInt(), -1, false),
              torch::Tensor(), torch::Tensor()};
    }
    // `position[i]` is ids[i]'s index among the sorted distinct ids `used`.
    const auto [used, position, counts] = at::_unique2(ids, /*sorted=*/true, /*return_inverse=*/true);
    const torch::Tensor rows = at::embedding_dense_backward(grads[0], position, used.numel(), /*padding_idx=*/-1,
                                                            /*scale_grad_by_freq=*/false);
    return {product.index_add_(0, used, rows), torch::Tensor(), torch::Tensor()};
  }
};

class TiedHeadProduct : public torch::autograd::Function<TiedHeadProduct> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const TiedGradientPtr& tied) {
    ctx->save_for_backward({hidden, weight});
    keep(ctx, tied);
    return torch::linear(hidden, weight);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    RECORD_USER_SCOPE("ddx::head");  // for the profile (profile_report.cpp)
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& hidden = saved[0];
    const torch::Tensor& weight = saved[1];
    // linear's own backward products over [B*T, D] (its matmul folds the batch): the same
    // calls, so the same bits. The weight's goes to the lookup, which runs after this.
    const torch::Tensor g = grads[0].reshape({-1, grads[0].size(-1)});
    kept(ctx)->head_product = g.t().mm(hidden.reshape({-1, hidden.size(-1)}));
    return {g.mm(weight).view_as(hidden), torch::Tensor(), torch::Tensor()};
  }
};

bool cheaper_on_this_device(const torch::Tensor& weight) {
  return weight.is_cpu() && weight.requires_grad() && torch::GradMode::is_enabled();
}

}  // namespace

torch::Tensor tied_embedding(const torch::Tensor& weight, const torch::Tensor& ids, const TiedGradientPtr& tied) {
  if (!tied || !cheaper_on_this_device(weight)) return torch::embedding(weight, ids);
  return TiedEmbeddingLookup::apply(weight, ids, tied);
}

torch::Tensor tied_head(const torch::Tensor& hidden, const torch::Tensor& weight, const TiedGradientPtr& tied) {
  if (!tied || !tied->lookup_in_graph || !cheaper_on_this_device(weight)) return torch::linear(hidden, weight);
  return TiedHeadProduct::apply(hidden, weight, tied);
}

torch::Tensor Embedding::forward(const torch::Tensor& ids) const { return torch::embedding(weight, ids); }

LayerNorm::LayerNorm(int64_t dim, double eps_, const torch::TensorOptions& options) : eps(eps_) {
  weight = register_parameter("weight", new_parameter({dim}, options));
  bias = register_parameter("bias", new_parameter({dim}, options));
}

torch::Tensor LayerNorm::forward(const torch::Tensor& x) const {
  RECORD_USER_SCOPE("ddx::norm");
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
}

RmsNorm::RmsNorm(int64_t dim, double eps_, const torch::TensorOptions& options) : eps(eps_) {
  weight = register_parameter("weight", new_parameter({dim}, options));
}

torch::Tensor RmsNorm::forward(const torch::Tensor& x) const {
  RECORD_USER_SCOPE("ddx::norm");
  // At least float32 (as HF's LlamaRMSNorm); float64 stays float64.
  torch::Tensor x32 = x.to(x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
  x32 = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * x32.to(x.scalar_type());
}

torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1);
  return x.view({b, t, heads, x.size(2) / heads}).transpose(1, 2);
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t heads = q.size(1), kv_heads = k.size(1);
  torch::Tensor keys = k, values = v;
  if (kv_heads != heads) {
    // Query head h reads KV head h / (heads / kv_heads): each KV head repeated in place.
    keys = k.repeat_interleave(heads / kv_heads, /*dim=*/1);
    values = v.repeat_interleave(heads / kv_heads, /*dim=*/1);
  }
  torch::Tensor y = at::scaled_dot_product_attention(q, keys, values, {}, 0.0, /*is_causal=*/true);
  const int64_t b = q.size(0), t = q.size(2);
  return y.transpose(1, 2).reshape({b, t, heads * q.size(3)});
}

RopeTables rope_tables(const ModelConfig& config, int64_t seq_len, const torch::Device& device) {
  // Float32 throughout, in the same sequence of operations as HF's rotary embedding, so long
  // positions round the same way as the reference implementation.
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const int64_t dim = config.head_dim();
  torch::Tensor exponent = torch::arange(0, dim, 2, f32.dtype(torch::kInt64)).to(torch::kFloat32) / dim;
  torch::Tensor inv_freq = 1.0 / torch::pow(config.rope_theta, exponent);
  const RopeScaling& s = config.rope_scaling;
  if (s.enabled()) {
    const double old_context = static_cast<double>(s.original_max_position_embeddings);
    const double low_freq_wavelen = old_context / s.low_freq_factor;
    const double high_freq_wavelen = old_context / s.high_freq_factor;
    torch::Tensor wavelen = 2 * M_PI / inv_freq;
    // Long wavelengths (beyond the original context) are slowed by `factor`, short ones kept.
    torch::Tensor scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
    torch::Tensor smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    torch::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    torch::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
    inv_freq = torch::where(medium, smoothed, scaled);
  }
  torch::Tensor positions = torch::arange(seq_len, f32);
  torch::Tensor freqs = torch::outer(positions, inv_freq);
  torch::Tensor angles = torch::cat({freqs, freqs}, -1);
  return {angles.cos(), angles.sin()};
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * tables.cos.to(x.scalar_type()) + rotated * tables.sin.to(x.scalar_type());
}

}  // namespace detail

LossSum causal_lm_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels) {
  const int64_t vocab = logits.size(-1);
  torch::Tensor flat_labels = labels.reshape({-1});
  LossSum out;
  // float32 for bf16 logits; float64 (the layer tests) stays float64.
  const auto compute = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  out.sum = torch::nn::functional::cross_entropy(
      logits.reshape({-1, vocab}).to(compute), flat_labels,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
  out.tokens = flat_labels.ne(-100).sum().item<int64_t>();
  return out;
}

}  // namespace ddx::models
