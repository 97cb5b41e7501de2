#include "train/tp_strategy.h"

#include <chrono>

#include "ddx/collectives.h"
#include "ddx/errors.h"
#include "models/parallel_layers.h"
#include "train/fsdp_checkpoint.h"
#include "train/test_breaks.h"

namespace ddx::train {
namespace {

// One-line errors for layouts the model or the world cannot take.
void check_layout(const StrategyContext& c, int tp) {
  const auto& o = c.options;
  const auto& m = c.model;
  const std::string n = std::to_string(tp);
  if (tp != c.world.size()) {
    throw UsageError("--tp " + n + " does not match the world size " + std::to_string(c.world.size()) +
                     ": --strategy tp puts every rank in one tensor-parallel group");
  }
  if (m.num_heads % tp != 0) {
    throw UsageError("--tp " + n + " does not divide the " + std::to_string(m.num_heads) + " query heads of model " +
                     m.name);
  }
  if (m.num_kv_heads % tp != 0) {
    throw UsageError("--tp " + n + " does not divide the " + std::to_string(m.num_kv_heads) + " KV heads of model " +
                     m.name);
  }
  if (o.sequence_parallel && o.seq_length % tp != 0) {
    throw UsageError("--sequence-parallel: -s " + std::to_string(o.seq_length) + " does not split over --tp " + n);
  }
}

}  // namespace

void TpStrategy::setup(const StrategyContext& c) {
  const int tp = c.options.tp > 0 ? static_cast<int>(c.options.tp) : c.world.size();
  check_layout(c, tp);
  group_ = &c.world.mesh({{"dp", 1}, {"tp", tp}}).group("tp");
  sequence_parallel_ = c.options.sequence_parallel;
  models::TensorParallel split{group_, sequence_parallel_};
  split.test_skip_input_reduce = test_breaks().tp_no_input_reduce;
  build(c, split);
  shards_ = models::parameter_shards(*model_);
}

double TpStrategy::finish_gradients() {
  if (!sequence_parallel_ || group_->size() == 1) return 0.0;
  // Replicated parameters ran on sequence slices: their gradients are partial sums. One
  // all-reduce of all of them, flattened.
  std::vector<torch::Tensor> grads;
  for (auto& [name, p] : parameters_) {
    if (!shards_.count(name) && p.grad().defined()) grads.push_back(p.mutable_grad());
  }
  if (grads.empty()) return 0.0;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
  torch::Tensor flat = torch::cat(flat_parts);
  const auto t0 = std::chrono::steady_clock::now();
  all_reduce(*group_, flat).wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
  return waited;
}

double TpStrategy::grad_norm_sq() const {
  // Shards are disjoint: their squares add over the group. Replicated parameters are equal on
  // every rank: rank 0 counts them.
  double sharded = 0, replicated = 0;
  for (const auto& [name, p] : parameters_) {
    if (!p.grad().defined()) continue;
    const double n = torch::linalg_vector_norm(p.grad(), 2, c10::nullopt, false, torch::kFloat32).item<double>();
    (shards_.count(name) ? sharded : replicated) += n * n;
  }
  auto total = torch::tensor({sharded + (group_->rank() == 0 ? replicated : 0.0)}, torch::kFloat64);
  all_reduce(*group_, total).wait();
  return total.item<double>();
}

torch::Tensor TpStrategy::full_tensor(const std::string& name, const torch::Tensor& local) {
  auto shard = shards_.find(name);
  if (shard == shards_.end()) return local.detach();
  // Every rank writes its slices into zeros and the group sums: each element has one owner,
  // and x + 0 is exact.
  torch::Tensor full = torch::zeros(shard->second.full_shape, local.options());
  int64_t offset = 0;
  for (const models::Range& r : shard->second.ranges) {
    full.narrow(shard->second.dim, r.begin, r.size()).copy_(local.detach().narrow(shard->second.dim, offset, r.size()));
    offset += r.size();
  }
  all_reduce(*group_, full).wait();
  return full;
}

NamedTensors TpStrategy::full_parameters() {
  NamedTensors out;
  for (const auto& [name, p] : parameters_) {
    out.emplace_back(name, full_tensor(name, p).to(torch::kCPU, torch::kFloat32).clone());
  }
  return out;
}

void TpStrategy::save_state(const std::string& dir) {
  NamedTensors params;
  std::map<std::string, AdamWState> state;
  for (const auto& [name, p] : parameters_) {
    params.emplace_back(name, full_tensor(name, p));
    auto s = optimizer_->state().find(name);
    if (s == optimizer_->state().end()) continue;
    state[name] = {s->second.step, full_tensor(name, s->second.exp_avg), full_tensor(name, s->second.exp_avg_sq)};
  }
  if (writes_checkpoint()) {
    write_model_file(dir + "/model.safetensors", params);
    write_optimizer_file(dir + "/optimizer.safetensors", state);
  }
  checkpoint_barrier();
}

void TpStrategy::load_state(const std::string& dir) {
  // Any checkpoint (single-device format or FSDP shards), read as rows of the full tensors.
  ParameterShapes expected;
  for (const auto& [name, p] : parameters_) {
    auto shard = shards_.find(name);
    expected.emplace_back(name, shard != shards_.end() ? shard->second.full_shape : p.sizes().vec());
  }
  auto reader = CheckpointRows::open(dir, expected);
  std::map<std::string, AdamWState> state;
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : parameters_) {
    auto shard = shards_.find(name);
    if (shard == shards_.end()) {
      p.detach().copy_(reader->rows(name, 0, p.size(0)));
      if (auto s = reader->optimizer_rows(name, 0, p.size(0), p)) state[name] = std::move(*s);
      continue;
    }
    const models::ParameterShard& sh = shard->second;
    std::vector<torch::Tensor> values, exp_avg, exp_avg_sq;
    int64_t step = -1;
    for (const models::Range& r : sh.ranges) {
      // Row ranges directly; a column slice from whole rows.
      const int64_t begin = sh.dim == 0 ? r.begin : 0, end = sh.dim == 0 ? r.end : sh.full_shape[0];
      auto cut = [&](const torch::Tensor& t) { return sh.dim == 0 ? t : t.narrow(sh.dim, r.begin, r.size()); };
      values.push_back(cut(reader->rows(name, begin, end)));
      if (auto s = reader->optimizer_rows(name, begin, end, p)) {
        exp_avg.push_back(cut(s->exp_avg));
        exp_avg_sq.push_back(cut(s->exp_avg_sq));
        step = s->step;
      }
    }
    p.detach().copy_(torch::cat(values, sh.dim));
    if (exp_avg.size() == sh.ranges.size()) {
      state[name] = {step, torch::cat(exp_avg, sh.dim).contiguous(), torch::cat(exp_avg_sq, sh.dim).contiguous()};
    }
  }
  optimizer_->state() = std::move(state);
}

void TpStrategy::checkpoint_barrier() { barrier(*group_).wait(); }

}  // namespace ddx::train
