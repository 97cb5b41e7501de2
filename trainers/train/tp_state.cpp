#include "train/tp_state.h"

#include "ddx/collectives.h"
#include "ddx/errors.h"

namespace ddx::train {

void check_tp_fits_model(const StrategyContext& c, int tp) {
  const auto& m = c.model;
  const std::string n = std::to_string(tp);
  if (m.num_heads % tp != 0) {
    throw UsageError("--tp " + n + " does not divide the " + std::to_string(m.num_heads) + " query heads of model " +
                     m.name);
  }
  if (m.num_kv_heads % tp != 0) {
    throw UsageError("--tp " + n + " does not divide the " + std::to_string(m.num_kv_heads) + " KV heads of model " +
                     m.name);
  }
  if (c.options.sequence_parallel && c.options.seq_length % tp != 0) {
    throw UsageError("--sequence-parallel: -s " + std::to_string(c.options.seq_length) + " does not split over --tp " + n);
  }
}

double sharded_grad_norm_sq(const std::vector<std::pair<std::string, torch::Tensor>>& grads,
                            const models::ParameterShards& shards, int tp_rank, Group& sum_over) {
  double sharded = 0, replicated = 0;
  for (const auto& [name, g] : grads) {
    if (!g.defined() || g.numel() == 0) continue;
    const double n = torch::linalg_vector_norm(g, 2, c10::nullopt, false, torch::kFloat32).item<double>();
    (shards.count(name) ? sharded : replicated) += n * n;
  }
  auto total = torch::tensor({sharded + (tp_rank == 0 ? replicated : 0.0)}, torch::kFloat64);
  all_reduce(sum_over, total).wait();
  return total.item<double>();
}

torch::Tensor full_tp_tensor(Group& tp, const models::ParameterShards& shards, const std::string& name,
                             const torch::Tensor& local) {
  auto shard = shards.find(name);
  if (shard == shards.end()) return local.detach();
  // Every rank writes its slices into zeros and the group sums: each element has one owner,
  // and x + 0 is exact.
  torch::Tensor full = torch::zeros(shard->second.full_shape, local.options());
  int64_t offset = 0;
  for (const models::Range& r : shard->second.ranges) {
    full.narrow(shard->second.dim, r.begin, r.size()).copy_(local.detach().narrow(shard->second.dim, offset, r.size()));
    offset += r.size();
  }
  all_reduce(tp, full).wait();
  return full;
}

NamedTensors full_tp_parameters(Group& tp, const models::ParameterShards& shards, const NamedTensors& local) {
  NamedTensors out;
  for (const auto& [name, t] : local) {
    out.emplace_back(name, full_tp_tensor(tp, shards, name, t).to(torch::kCPU, torch::kFloat32).clone());
  }
  return out;
}

ParameterShapes full_shapes(const NamedTensors& local, const models::ParameterShards& shards) {
  ParameterShapes out;
  for (const auto& [name, t] : local) {
    auto shard = shards.find(name);
    out.emplace_back(name, shard != shards.end() ? shard->second.full_shape : t.sizes().vec());
  }
  return out;
}

LocalRows read_tp_rows(const CheckpointRows& reader, const std::string& name, const models::ParameterShards& shards,
                       int64_t begin, int64_t end, const torch::Tensor& like) {
  auto shard = shards.find(name);
  if (shard == shards.end()) return {reader.rows(name, begin, end), reader.optimizer_rows(name, begin, end, like)};
  const models::ParameterShard& sh = shard->second;
  // The local rows as pieces of the full tensor: under a dim-0 split each range contributes
  // the part of [begin, end) that falls in it; under a column split the rows are the full
  // tensor's and each range is a column slice of them.
  std::vector<torch::Tensor> values, exp_avg, exp_avg_sq;
  int64_t step = -1, local = 0;
  bool complete_state = true;
  for (const models::Range& r : sh.ranges) {
    int64_t row_begin = begin, row_end = end;
    if (sh.dim == 0) {
      row_begin = r.begin + std::max<int64_t>(begin - local, 0);
      row_end = r.begin + std::min<int64_t>(end - local, r.size());
      local += r.size();
      if (row_begin >= row_end) continue;
    }
    auto cut = [&](const torch::Tensor& t) { return sh.dim == 0 ? t : t.narrow(sh.dim, r.begin, r.size()); };
    values.push_back(cut(reader.rows(name, row_begin, row_end)));
    if (auto s = reader.optimizer_rows(name, row_begin, row_end, like)) {
      exp_avg.push_back(cut(s->exp_avg));
      exp_avg_sq.push_back(cut(s->exp_avg_sq));
      step = s->step;
    } else {
      complete_state = false;
    }
  }
  LocalRows out;
  out.values = torch::cat(values, sh.dim);
  if (complete_state && !exp_avg.empty()) {
    out.state = AdamWState{step, torch::cat(exp_avg, sh.dim).contiguous(), torch::cat(exp_avg_sq, sh.dim).contiguous()};
  }
  return out;
}

void save_full_tp_checkpoint(const std::string& dir, Group& tp, const models::ParameterShards& shards,
                             const NamedTensors& parameters, const std::map<std::string, AdamWState>& state,
                             bool writer) {
  NamedTensors full;
  std::map<std::string, AdamWState> full_state;
  for (const auto& [name, p] : parameters) {
    full.emplace_back(name, full_tp_tensor(tp, shards, name, p));
    auto s = state.find(name);
    if (s == state.end()) continue;
    full_state[name] = {s->second.step, full_tp_tensor(tp, shards, name, s->second.exp_avg),
                        full_tp_tensor(tp, shards, name, s->second.exp_avg_sq)};
  }
  if (writer) {
    write_model_file(dir + "/model.safetensors", full);
    write_optimizer_file(dir + "/optimizer.safetensors", full_state);
  }
}

void load_tp_checkpoint(const std::string& dir, const models::ParameterShards& shards, NamedTensors& parameters,
                        std::map<std::string, AdamWState>& state) {
  auto reader = CheckpointRows::open(dir, full_shapes(parameters, shards));
  std::map<std::string, AdamWState> loaded;
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : parameters) {
    LocalRows rows = read_tp_rows(*reader, name, shards, 0, p.size(0), p);
    p.detach().copy_(rows.values);
    if (rows.state) loaded[name] = std::move(*rows.state);
  }
  state = std::move(loaded);
}

}  // namespace ddx::train
