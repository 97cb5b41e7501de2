#include "strategies/tp/tp_state.h"

#include <algorithm>

#include "ddx/collectives.h"
#include "ddx/errors/errors.h"

namespace ddx::train {

double sharded_grad_norm_sq(const std::vector<std::pair<std::string, torch::Tensor>>& grads,
                            const models::ParameterShards& shards, int tp_rank, Group& sum_over) {
  double sharded = 0, replicated = 0;
  for (const auto& [name, g] : grads) {
    if (!g.defined() || g.numel() == 0) continue;
    add_squared_norm(g, shards.count(name) ? sharded : replicated);
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
    out.emplace_back(name, full_tp_tensor(tp, shards, name, t).to(torch::kCPU, full_dtype(t.scalar_type())).clone());
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

TpBlocks tp_blocks(const models::ParameterShards& shards, const std::string& name,
                   const std::vector<int64_t>& local_shape, int64_t begin, int64_t end) {
  TpBlocks out;
  auto shard = shards.find(name);
  auto add = [&](std::vector<int64_t> offset, std::vector<int64_t> shape) {
    out.offsets.push_back(std::move(offset));
    out.shapes.push_back(std::move(shape));
  };
  if (shard == shards.end()) {
    std::vector<int64_t> offset(local_shape.size(), 0), shape = local_shape;
    offset[0] = begin;
    shape[0] = end - begin;
    add(offset, shape);
    return out;
  }
  const models::ParameterShard& sh = shard->second;
  out.dim = sh.dim;
  int64_t local = 0;  // under a dim-0 split: where each range starts in the local rows
  for (const models::Range& r : sh.ranges) {
    std::vector<int64_t> offset(sh.full_shape.size(), 0), shape = sh.full_shape;
    if (sh.dim == 0) {
      const int64_t start = local, b = std::max(begin, start), e = std::min(end, start + r.size());
      local += r.size();
      if (b >= e) continue;
      offset[0] = r.begin + (b - start);
      shape[0] = e - b;
    } else {
      offset[0] = begin;
      shape[0] = end - begin;
      offset[sh.dim] = r.begin;
      shape[sh.dim] = r.size();
    }
    add(offset, shape);
  }
  return out;
}

LocalRows read_tp_rows(const CheckpointRows& reader, const std::string& name, const models::ParameterShards& shards,
                       int64_t begin, int64_t end, const torch::Tensor& like) {
  const TpBlocks blocks = tp_blocks(shards, name, like.sizes().vec(), begin, end);
  // Whole rows from the checkpoint, cut to the block.
  auto cut = [&](torch::Tensor t, size_t k) {
    for (size_t d = 1; d < blocks.offsets[k].size(); ++d) {
      t = t.narrow(static_cast<int64_t>(d), blocks.offsets[k][d], blocks.shapes[k][d]);
    }
    return t;
  };
  std::vector<torch::Tensor> values, exp_avg, exp_avg_sq;
  int64_t step = -1;
  for (size_t k = 0; k < blocks.offsets.size(); ++k) {
    const int64_t b = blocks.offsets[k][0], e = b + blocks.shapes[k][0];
    values.push_back(cut(reader.rows(name, b, e), k));
    if (auto s = reader.optimizer_rows(name, b, e, like)) {
      exp_avg.push_back(cut(s->exp_avg, k));
      exp_avg_sq.push_back(cut(s->exp_avg_sq, k));
      step = s->step;
    }
  }
  LocalRows out;
  out.values = torch::cat(values, blocks.dim);
  if (!exp_avg.empty() && exp_avg.size() == values.size()) {
    out.state = AdamWState{step, torch::cat(exp_avg, blocks.dim).contiguous(), torch::cat(exp_avg_sq, blocks.dim).contiguous()};
  }
  return out;
}

void TpCheckpointWriter::add(const models::ParameterShards& shards, const std::string& name,
                             const std::vector<int64_t>& local_shape, int64_t begin, int64_t end,
                             const torch::Tensor& rows, const AdamWState* state) {
  if (begin >= end) return;
  const TpBlocks blocks = tp_blocks(shards, name, local_shape, begin, end);
  auto shard = shards.find(name);
  int64_t position = 0;  // along blocks.dim in `rows`
  for (size_t k = 0; k < blocks.offsets.size(); ++k) {
    const int64_t size = blocks.shapes[k][blocks.dim];
    auto slice = [&](const torch::Tensor& t) { return t.detach().narrow(blocks.dim, position, size).contiguous(); };
    ShardEntry e;
    e.name = name;
    e.shape = shard != shards.end() ? shard->second.full_shape : local_shape;
    e.row_begin = blocks.offsets[k][0];
    e.row_end = e.row_begin + blocks.shapes[k][0];
    e.offset = blocks.offsets[k];
    e.rows = slice(rows);
    if (state != nullptr) {
      states_.push_back({state->step, slice(state->exp_avg), slice(state->exp_avg_sq)});
      e.state = &states_.back();
    }
    entries_.push_back(std::move(e));
    position += size;
  }
}

void TpCheckpointWriter::write(const std::string& dir, Group& world, const ParameterShapes& shapes,
                               const models::ModelConfig& config) {
  write_shard_file(dir, world.rank(), world.size(), entries_);
  barrier(world).wait();
  if (world.rank() == 0) write_piece_index(dir, world.size(), shapes, config);
  barrier(world).wait();
}

void save_tp_checkpoint(const std::string& dir, Group& world, const models::ParameterShards& shards,
                        const NamedTensors& parameters, const std::map<std::string, AdamWState>& state, int tp_rank,
                        bool writes, const models::ModelConfig& config) {
  TpCheckpointWriter writer;
  for (const auto& [name, p] : parameters) {
    if (!writes || (!shards.count(name) && tp_rank != 0)) continue;
    auto s = state.find(name);
    writer.add(shards, name, p.sizes().vec(), 0, p.size(0), p, s == state.end() ? nullptr : &s->second);
  }
  writer.write(dir, world, full_shapes(parameters, shards), config);
}

void load_tp_checkpoint(const std::string& dir, const models::ParameterShards& shards, NamedTensors& parameters,
                        std::map<std::string, AdamWState>& state, const ParameterShapes& expected) {
  auto reader = CheckpointRows::open(dir, expected.empty() ? full_shapes(parameters, shards) : expected);
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
