// Tensor-parallel operators and layers; see parallel_layers.h for the layout.
#include "models/parallel_layers.h"

#include "ddx/collectives.h"
#include "ddx/errors/errors.h"
#include "ddx/process_group.h"
#include "models/layers.h"

namespace ddx::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool split(const TensorParallel& tp) { return tp.group != nullptr && tp.group->size() > 1; }

// A Group* rides in the autograd context as an integer: the group outlives every graph.
void save_group(AutogradContext* ctx, Group* group) {
  ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(group));
}
Group& saved_group(AutogradContext* ctx) {
  return *reinterpret_cast<Group*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
}

torch::Tensor all_reduced(const torch::Tensor& x, Group& group, ReduceOp op = ReduceOp::Sum) {
  torch::Tensor y = x.clone(at::MemoryFormat::Contiguous);
  all_reduce(group, y, op).wait();
  return y;
}

// The sequence is dim 1 of [B, T, ...]; the collective layer splits along dim 0, so the
// sequence is moved to the front for the collective and back after it.
torch::Tensor all_gathered_sequence(const torch::Tensor& x, Group& group) {
  torch::Tensor front = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = front.sizes().vec();
  shape[0] *= group.size();
  torch::Tensor out = torch::empty(shape, front.options());
  all_gather(group, out, front).wait();
  return out.transpose(0, 1).contiguous();
}

torch::Tensor reduce_scattered_sequence(const torch::Tensor& x, Group& group) {
  const int64_t seq = x.size(1);
  if (seq % group.size() != 0) {
    throw UsageError("sequence length " + std::to_string(seq) + " does not split over " +
                     std::to_string(group.size()) + " sequence-parallel ranks");
  }
  torch::Tensor front = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = front.sizes().vec();
  shape[0] = seq / group.size();
  torch::Tensor out = torch::empty(shape, front.options());
  reduce_scatter(group, out, front).wait();
  return out.transpose(0, 1).contiguous();
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, Group* group) {
    save_group(ctx, group);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduced(grads[0], saved_group(ctx)), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, Group* group) {
    return all_reduced(x, *group);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], torch::Tensor()}; }
};

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, Group* group) {
    save_group(ctx, group);
    return all_gathered_sequence(x, *group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduce_scattered_sequence(grads[0], saved_group(ctx)), torch::Tensor()};
  }
};

struct ScatterSequence : torch::autograd::Function<ScatterSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, Group* group) {
    save_group(ctx, group);
    return reduce_scattered_sequence(x, *group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_gathered_sequence(grads[0], saved_group(ctx)), torch::Tensor()};
  }
};

// Megatron's vocab-parallel cross-entropy (parallelism.md §4.4) on [M, V/N] logits. Loss per
// token = log(sum_v exp(z_v - max)) - (z_target - max); the target column lives on one rank,
// the others contribute 0 to its sum. Backward: softmax minus one-hot on the owning rank.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& labels,
                               int64_t vocab_begin, Group* group) {
    // Statistics in float32 for bf16 logits (as causal_lm_loss_sum does); float64 stays float64.
    const auto compute = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    torch::Tensor z = logits.to(compute);
    torch::Tensor max = std::get<0>(z.max(-1));
    if (group) all_reduce(*group, max, ReduceOp::Max).wait();
    torch::Tensor shifted = z - max.unsqueeze(-1);
    torch::Tensor mine = labels.ge(vocab_begin).logical_and(labels.lt(vocab_begin + z.size(-1)));
    torch::Tensor column = (labels - vocab_begin).masked_fill(mine.logical_not(), 0);
    torch::Tensor exp = shifted.exp();
    // One SUM for both: the target logit (nonzero on its owner only) and the sum of exponentials.
    torch::Tensor sums = torch::stack({shifted.gather(-1, column.unsqueeze(-1)).squeeze(-1).masked_fill(mine.logical_not(), 0),
                                       exp.sum(-1)});
    if (group) all_reduce(*group, sums).wait();
    torch::Tensor valid = labels.ne(-100);
    torch::Tensor loss = (sums[1].log() - sums[0]).masked_fill(valid.logical_not(), 0);
    ctx->save_for_backward({exp / sums[1].unsqueeze(-1), column, mine, valid});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return loss;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor grad = saved[0].clone();
    grad.scatter_add_(-1, saved[1].unsqueeze(-1), -saved[2].to(grad.scalar_type()).unsqueeze(-1));
    grad.mul_((grads[0] * saved[3].to(grads[0].scalar_type())).unsqueeze(-1));
    const auto dtype = static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int TensorParallel::size() const { return group ? group->size() : 1; }
int TensorParallel::rank() const { return group ? group->rank() : 0; }

Range shard_range(int64_t total, int parts, int part, const std::string& what) {
  const int64_t per = (total + parts - 1) / parts;
  Range r{std::min(total, part * per), std::min(total, (part + 1) * per)};
  if ((parts - 1) * per >= total) {
    throw UsageError(what + " of " + std::to_string(total) + " cannot be split over " + std::to_string(parts) +
                     " tensor-parallel ranks without an empty shard");
  }
  return r;
}

ParameterShards parameter_shards(torch::nn::Module& model) {
  ParameterShards out;
  for (const auto& item : model.named_modules()) {
    const auto* sharded = dynamic_cast<const ShardedModule*>(item.value().get());
    if (!sharded) continue;
    for (auto& [local, shard] : sharded->shards()) out[item.key().empty() ? local : item.key() + "." + local] = shard;
  }
  return out;
}

torch::Tensor copy_to_tp(const torch::Tensor& x, const TensorParallel& tp) {
  return split(tp) && !tp.test_skip_input_reduce ? CopyToTp::apply(x, tp.group) : x;
}
torch::Tensor reduce_from_tp(const torch::Tensor& x, const TensorParallel& tp) {
  return split(tp) ? ReduceFromTp::apply(x, tp.group) : x;
}
torch::Tensor gather_sequence(const torch::Tensor& x, const TensorParallel& tp) {
  return split(tp) ? GatherSequence::apply(x, tp.group) : x;
}
torch::Tensor scatter_sequence(const torch::Tensor& x, const TensorParallel& tp) {
  return split(tp) ? ScatterSequence::apply(x, tp.group) : x;
}

Range sequence_range(int64_t seq_len, const TensorParallel& tp) {
  if (!tp.sequence_parallel || !split(tp)) return {0, seq_len};
  const int64_t n = tp.size();
  if (seq_len % n != 0) {
    throw UsageError("sequence length " + std::to_string(seq_len) + " does not split over " + std::to_string(n) +
                     " sequence-parallel ranks");
  }
  return {tp.rank() * seq_len / n, (tp.rank() + 1) * seq_len / n};
}

torch::Tensor enter_tp_region(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.sequence_parallel ? gather_sequence(x, tp) : copy_to_tp(x, tp);
}

torch::Tensor leave_tp_region(const torch::Tensor& partial, const TensorParallel& tp) {
  return tp.sequence_parallel ? scatter_sequence(partial, tp) : reduce_from_tp(partial, tp);
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in_, int64_t out_, std::vector<Range> ranges_, bool has_bias,
                                           const TensorParallel& tp_, const torch::TensorOptions& options)
    : in(in_), out(out_), ranges(std::move(ranges_)), tp(tp_) {
  int64_t local = 0;
  for (const Range& r : ranges) local += r.size();
  weight = register_parameter("weight", detail::new_parameter({local, in}, options));
  if (has_bias) bias = register_parameter("bias", detail::new_parameter({local}, options));
}

ParameterShards ColumnParallelLinear::shards() const {
  if (!split(tp)) return {};
  ParameterShards s{{"weight", {{out, in}, 0, ranges}}};
  if (bias.defined()) s["bias"] = {{out}, 0, ranges};
  return s;
}

RowParallelLinear::RowParallelLinear(int64_t in_, int64_t out_, Range in_range_, bool has_bias,
                                     const TensorParallel& tp_, const torch::TensorOptions& options)
    : in(in_), out(out_), in_range(in_range_), tp(tp_) {
  weight = register_parameter("weight", detail::new_parameter({out, in_range.size()}, options));
  if (has_bias) bias = register_parameter("bias", detail::new_parameter({out}, options));
}

torch::Tensor RowParallelLinear::forward(const torch::Tensor& x) const {
  // Unsplit: the plain layer's single fused op, so the single-device numbers do not move.
  if (!split(tp)) return torch::linear(x, weight, bias);
  torch::Tensor y = leave_tp_region(torch::linear(x, weight), tp);
  return bias.defined() ? y + bias : y;
}

ParameterShards RowParallelLinear::shards() const {
  if (!split(tp)) return {};
  return {{"weight", {{out, in}, 1, {in_range}}}};
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab_, int64_t dim_, const TensorParallel& tp_,
                                               const torch::TensorOptions& options)
    : vocab(vocab_), dim(dim_), rows(shard_range(vocab_, tp_.size(), tp_.rank(), "a vocabulary")), tp(tp_) {
  weight = register_parameter("weight", detail::new_parameter({rows.size(), dim}, options));
}

torch::Tensor VocabParallelEmbedding::forward(const torch::Tensor& ids, const TiedGradientPtr& tied) const {
  if (!split(tp)) return detail::tied_embedding(weight, ids, tied);
  torch::Tensor outside = ids.lt(rows.begin).logical_or(ids.ge(rows.end));
  torch::Tensor partial = torch::embedding(weight, (ids - rows.begin).masked_fill(outside, 0))
                              .masked_fill(outside.unsqueeze(-1), 0);
  return leave_tp_region(partial, tp);
}

torch::Tensor VocabParallelEmbedding::logits(const torch::Tensor& hidden, const TiedGradientPtr& tied) const {
  return split(tp) ? torch::linear(hidden, weight) : detail::tied_head(hidden, weight, tied);
}

ParameterShards VocabParallelEmbedding::shards() const {
  if (!split(tp)) return {};
  return {{"weight", {{vocab, dim}, 0, {rows}}}};
}

LossSum vocab_parallel_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels, Range vocab,
                                const TensorParallel& tp) {
  if (!split(tp)) return causal_lm_loss_sum(logits, labels);
  const int64_t local = logits.size(-1);
  torch::Tensor flat_labels = labels.reshape({-1});
  LossSum out;
  out.sum = VocabParallelCrossEntropy::apply(logits.reshape({-1, local}), flat_labels, vocab.begin, tp.group).sum();
  out.tokens = flat_labels.ne(-100).sum().item<int64_t>();
  return out;
}

}  // namespace ddx::models
