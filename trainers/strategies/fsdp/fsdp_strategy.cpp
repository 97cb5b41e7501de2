#include "strategies/fsdp/fsdp_strategy.h"

#include <torch/csrc/autograd/function_hook.h>

#include <cmath>
#include <set>

#include "checkpoint/sharded_checkpoint.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "models/hf_checkpoint.h"
#include "models/parallel_layers.h"
#include "observe/phase_timer.h"
#include "strategies/parallel_mesh.h"
#include "strategies/tp/tp_state.h"
#include "ddx/text/text.h"

namespace ddx::train {
namespace {

// Fires after AccumulateGrad has written the (unsharded) parameter's .grad.
class UnitGradientHook : public torch::autograd::FunctionPostHook {
 public:
  UnitGradientHook(FsdpStrategy* strategy, int unit, int param) : strategy_(strategy), unit_(unit), param_(param) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    strategy_->gradient_ready(unit_, param_);
    return outputs;
  }

 private:
  FsdpStrategy* strategy_;
  int unit_, param_;
};

torch::Dtype parse_dtype(const std::string& flag, const std::string& value, torch::Dtype fallback) {
  if (value.empty()) return fallback;
  if (value == "fp32") return torch::kFloat32;
  if (value == "bf16") return torch::kBFloat16;
  throw UsageError(flag + " " + value + " is not fp32 or bf16");
}


}  // namespace

// Data parallel over the whole world: the mesh has no dimension but dp.
void FsdpStrategy::setup(const StrategyContext& c) { setup_on(c, *build_parallel_mesh(c).dp, {}); }

void FsdpStrategy::setup_on(const StrategyContext& c, Group& group, const models::TensorParallel& split,
                            const FsdpPieces& pieces) {
  group_ = &group;
  device_ = c.device;
  config_ = &c.model;
  prefetch_ = static_cast<int>(options_.prefetch);
  checkpoint_activations_ = options_.checkpoint_activations;

  FsdpPrecision precision;
  precision.shard = c.dtype;
  precision.param = parse_dtype("--mp-param-dtype", options_.mp_param_dtype, c.dtype);
  precision.reduce = parse_dtype("--mp-reduce-dtype", options_.mp_reduce_dtype, precision.param);
  FsdpDevices devices{c.device, options_.cpu_offload ? torch::Device(torch::kCPU) : c.device};

  // No rank ever holds the whole model: the skeleton has shapes but no bytes, and each rank
  // creates only its own rows below.
  model_ = models::build_model_skeleton(c.model, c.device, precision.param, split);
  build_units(c, devices, precision, pieces);
  initialise_shards(c, split);

  for (int64_t i = 0; i < c.model.num_layers; ++i) {
    block_functions_.push_back([this, i](const torch::Tensor& x) { return model_->block(i, x); });
  }
  pending_.assign(units_.size(), 0);
  reduce_.assign(units_.size(), true);
  arrived_.resize(units_.size());
  backward_done_.assign(units_.size(), true);
  for (size_t u = 0; u < units_.size(); ++u) {
    const auto& params = units_[u]->parameters();
    for (size_t k = 0; k < params.size(); ++k) {
      auto acc = torch::autograd::impl::grad_accumulator(params[k]);
      acc->add_post_hook(std::make_unique<UnitGradientHook>(this, static_cast<int>(u), static_cast<int>(k)));
      accumulators_.push_back(std::move(acc));
    }
  }
  AdamWConfig config;
  config.weight_decay = c.run.weight_decay;
  config.fused = c.run.fused_adamw;
  optimizer_ = std::make_unique<AdamW>(config);
  int64_t shard_numel = 0;
  for (const auto& unit : units_) shard_numel += unit->layout().shard_numel;
  log::debug("fsdp: ", units_.size(), " units, ", shard_numel, " elements per rank (padding included)");
}

void FsdpStrategy::build_units(const StrategyContext& c, const FsdpDevices& devices, const FsdpPrecision& precision,
                               const FsdpPieces& pieces) {
  std::map<std::string, torch::Tensor> by_name;
  std::vector<std::string> all_names;
  for (auto& item : model_->named_parameters()) {
    by_name[item.key()] = item.value();
    all_names.push_back(item.key());
  }
  const std::vector<std::string> tied = model_->tied_parameter_names();
  std::set<std::string> claimed(tied.begin(), tied.end());
  auto unclaimed = [&](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const auto& n : names) {
      if (!by_name.count(n)) throw std::logic_error("fsdp: the model lists unknown parameter '" + n + "'");
      if (claimed.insert(n).second) out.push_back(n);
    }
    return out;
  };
  std::vector<std::string> embedding_names = unclaimed(model_->embedding_parameter_names());
  std::vector<std::vector<std::string>> block_names;
  for (int64_t i = 0; i < c.model.num_layers; ++i) {
    std::vector<std::string> names;
    for (auto& item : model_->block_module(i)->named_parameters()) names.push_back("blocks." + std::to_string(i) + "." + item.key());
    block_names.push_back(unclaimed(names));
  }
  std::vector<std::string> head_names = unclaimed(model_->head_parameter_names());
  // The root: tied parameters and anything no unit claimed, gathered for the whole step.
  std::vector<std::string> root_names(tied.begin(), tied.end());
  for (const auto& n : all_names) {
    if (!claimed.count(n)) root_names.push_back(n);
  }

  auto add_unit = [&](const std::string& name, const std::vector<std::string>& names, bool reshard) {
    if (names.empty()) return -1;
    std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
    std::vector<torch::Tensor> params;
    for (const auto& n : names) {
      shapes.emplace_back(n, by_name.at(n).sizes().vec());
      params.push_back(by_name.at(n));
    }
    units_.push_back(std::make_unique<FsdpUnit>(make_unit_layout(name, shapes, group_->size()), std::move(params),
                                                group_->rank(), devices, precision));
    reshard_after_forward_.push_back(reshard);
    return static_cast<int>(units_.size() - 1);
  };
  const bool reshard = options_.reshard_after_forward;
  auto held_block = [&](int64_t i) { return pieces.blocks.empty() || pieces.blocks.at(i); };
  if (pieces.embeddings || pieces.head) root_ = add_unit("root", root_names, false);
  if (pieces.embeddings) embeddings_ = add_unit("embeddings", embedding_names, reshard);
  for (int64_t i = 0; i < c.model.num_layers; ++i) {
    blocks_.push_back(held_block(i) ? add_unit("block " + std::to_string(i), block_names[i], reshard) : -1);
  }
  // Backward starts with the head: freeing it after forward would only gather it again.
  if (pieces.head) head_ = add_unit("head", head_names, false);
}

ParameterShapes FsdpStrategy::parameter_shapes() const {
  ParameterShapes shapes;
  for (const auto& unit : units_) {
    for (const auto& p : unit->layout().parameters) shapes.emplace_back(p.name, p.shape);
  }
  return shapes;
}

void FsdpStrategy::for_each_owned(const OwnedRowsFunction& fn) {
  const int rank = group_->rank();
  torch::NoGradGuard no_grad;
  for (auto& unit : units_) {
    for (size_t i = 0; i < unit->layout().parameters.size(); ++i) {
      const ShardedParameter& p = unit->layout().parameters[i];
      // A rank past the end of a short dim 0 owns nothing of that parameter.
      if (p.owned_rows(rank) > 0) fn(*unit, i, p, p.row_begin(rank), p.row_end(rank));
    }
  }
}

std::vector<Strategy::OwnedParameter> FsdpStrategy::owned_parameters() {
  std::vector<OwnedParameter> out;
  for (auto& unit : units_) {
    for (size_t i = 0; i < unit->layout().parameters.size(); ++i) {
      out.push_back({unit->layout().parameters[i].name, unit->owned_rows(i), nullptr});
    }
  }
  return out;
}

void FsdpStrategy::initialise_shards(const StrategyContext& c, const models::TensorParallel& split) {
  if (split.group != nullptr) {
    // A TP slice's rows are not rows of the full tensor (column slices, c_attn's three head
    // ranges): build this rank's slices as TP does, keep this rank's rows of them. The slice
    // (1/TP of the model) lives only during setup.
    std::shared_ptr<models::CausalLM> slices = models::build_model(c.model, c.run.seed, torch::kCPU, torch::kFloat32, split);
    if (!c.run.init_from.empty()) models::load_hf_weights(*slices, c.run.init_from);
    std::map<std::string, torch::Tensor> by_name;
    for (auto& item : slices->named_parameters()) by_name[item.key()] = item.value();
    for_each_owned([&](FsdpUnit& unit, size_t i, const ShardedParameter& p, int64_t begin, int64_t end) {
      unit.owned_rows(i).copy_(by_name.at(p.name).narrow(0, begin, end - begin));
    });
    return;
  }
  std::map<std::string, models::HfSource> sources;
  // Headers only; each rank then reads the byte ranges of its own rows.
  if (!c.run.init_from.empty()) sources = models::match_hf_tensors(c.model, parameter_shapes(), c.run.init_from);
  for_each_owned([&](FsdpUnit& unit, size_t i, const ShardedParameter& p, int64_t begin, int64_t end) {
    torch::Tensor rows = sources.empty() ? models::init_parameter(c.model, p.name, p.shape, c.run.seed, begin, end)
                                         : models::read_hf_rows(sources.at(p.name), begin, end);
    unit.owned_rows(i).copy_(rows);
  });
}

void FsdpStrategy::note_memory() {
  int64_t live = 0;
  for (const auto& unit : units_) live += unit->unsharded_bytes() + unit->transient_bytes() + unit->unsharded_gradient_bytes();
  unsharded_peak_bytes_ = std::max(unsharded_peak_bytes_, live);
}

void FsdpStrategy::ensure_gathered(int u) {
  FsdpUnit& unit = *units_[u];
  if (unit.state() == FsdpUnit::State::Sharded) {
    unit.begin_gather(*group_);
    ++gathers_;
  }
  if (unit.state() == FsdpUnit::State::Gathering) {
    note_memory();
    gather_wait_s_ += unit.finish_gather();
  }
  note_memory();
}

void FsdpStrategy::prefetch(int position, int direction) {
  int issued = 0;
  const int first = prefetch_range_.first >= 0 ? prefetch_range_.first : 0;
  const int last = prefetch_range_.second >= 0 ? prefetch_range_.second : static_cast<int>(units_.size()) - 1;
  for (int u = position + direction; u >= first && u <= last && issued < prefetch_; u += direction) {
    if (u == root_) continue;
    if (direction < 0 && backward_done_[u]) continue;
    FsdpUnit& unit = *units_[u];
    if (unit.state() == FsdpUnit::State::Sharded) {
      unit.begin_gather(*group_);
      ++gathers_;
      ++prefetched_;
    }
    ++issued;
  }
}

torch::Tensor FsdpStrategy::run_unit(int u, const std::function<torch::Tensor()>& forward) {
  if (u < 0) return forward();
  ensure_gathered(u);
  prefetch(u, +1);
  torch::Tensor out = forward();
  note_memory();
  if (reshard_after_forward_[u]) units_[u]->reshard();
  if (out.requires_grad()) out.register_hook([this, u](const torch::Tensor&) { before_unit_backward(u); });
  return out;
}

torch::Tensor FsdpStrategy::run_embeddings(const torch::Tensor& tokens) {
  return run_unit(embeddings_, [&] { return model_->embed(tokens); });
}

torch::Tensor FsdpStrategy::run_block(int64_t i, const torch::Tensor& h) {
  return run_unit(blocks_.at(i), [&] {
    return checkpoint_activations_ ? checkpointed(&block_functions_[i], h) : model_->block(i, h);
  });
}

torch::Tensor FsdpStrategy::run_head(const torch::Tensor& h) {
  return run_unit(head_, [&] { return model_->head(h); });
}

void FsdpStrategy::expect_backward(int u, bool reduce) {
  reduce_[u] = reduce;
  pending_[u] = static_cast<int>(units_[u]->parameters().size());
  arrived_[u].assign(units_[u]->parameters().size(), false);
  backward_done_[u] = false;
}

double FsdpStrategy::forward_backward(const MicroBatch& batch, double loss_scale, bool last_micro, PhaseTimes& times) {
  for (size_t u = 0; u < units_.size(); ++u) expect_backward(static_cast<int>(u), last_micro);
  models::LossSum loss;
  {
    PhaseTimer t(times.forward, device_, profile_scope::kForward);
    if (root_ >= 0) ensure_gathered(root_);
    torch::Tensor h = run_embeddings(batch.inputs);
    for (int64_t i = 0; i < config_->num_layers; ++i) h = run_block(i, h);
    torch::Tensor logits = run_head(h);
    loss = model_->loss_sum(logits, batch.labels);  // vocab-parallel under 2D
  }
  {
    PhaseTimer t(times.backward, device_, profile_scope::kBackward);
    (loss.sum * loss_scale).backward();
  }
  return loss.sum.item<double>();
}

void FsdpStrategy::before_unit_backward(int u) {
  ensure_gathered(u);
  prefetch(u, -1);
}

void FsdpStrategy::gradient_ready(int u, int param) {
  if (backward_done_[u] || arrived_[u][param]) return;
  arrived_[u][param] = true;
  if (--pending_[u] == 0) after_unit_backward(u);
}

void FsdpStrategy::after_unit_backward(int u) {
  backward_done_[u] = true;
  FsdpUnit& unit = *units_[u];
  note_memory();
  if (reduce_[u]) {
    // One reduce-scatter in flight at a time (as FSDP2): the previous unit's flat gradient
    // buffers are released before this unit's are allocated, so the transient memory is one
    // unit's, not the whole model's gradient.
    finish_pending_reduce_scatters();
    unit.begin_reduce_scatter(*group_);
    reduce_order_.push_back(u);
    ++reduce_scatters_;
  }
  // Without sync the unsharded gradients stay and accumulate over the micro-steps.
  unit.reshard();
  note_memory();
}

double FsdpStrategy::finish_gradients() {
  // A unit some of whose parameters got no gradient (unused this step) is reduced with zeros
  // for them, in unit order, so every rank issues the same collectives.
  for (int u = static_cast<int>(units_.size()) - 1; u >= 0; --u) {
    if (!backward_done_[u]) after_unit_backward(u);
  }
  finish_pending_reduce_scatters();
  const double waited = reduce_wait_s_;
  reduce_wait_s_ = 0;
  return waited;
}

void FsdpStrategy::finish_pending_reduce_scatters() {
  for (int u : reduce_order_) reduce_wait_s_ += units_[u]->finish_reduce_scatter();
  reduce_order_.clear();
  note_memory();
}

double FsdpStrategy::grad_norm_sq() {
  // Local shards' squares summed over the group (padding rows are zero).
  double local = 0;
  for (const auto& unit : units_) {
    if (unit->flat_shard_grad().defined()) add_squared_norm(unit->flat_shard_grad(), local);
  }
  auto total = torch::tensor({local}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  all_reduce(*group_, total).wait();
  return total.item<double>();
}

double FsdpStrategy::optimizer_step(double lr, double max_grad_norm) {
  const double norm = std::sqrt(grad_norm_sq());
  torch::NoGradGuard no_grad;
  if (max_grad_norm > 0) {
    const double coef = max_grad_norm / (norm + 1e-6);
    if (coef < 1.0) {
      for (auto& unit : units_) {
        if (unit->flat_shard_grad().defined()) unit->flat_shard_grad().mul_(coef);
      }
    }
  }
  for (auto& unit : units_) {
    for (size_t i = 0; i < unit->layout().parameters.size(); ++i) {
      torch::Tensor grad = unit->owned_grad_rows(i);
      if (!grad.defined() || grad.numel() == 0) continue;
      torch::Tensor param = unit->owned_rows(i);
      optimizer_->update(unit->layout().parameters[i].name, param, grad, lr);
    }
    unit->flat_shard_grad() = torch::Tensor();
  }
  last_stats_ = {{"fsdp_units", static_cast<double>(units_.size())},
                 {"fsdp_all_gathers", static_cast<double>(gathers_)},
                 {"fsdp_prefetched", static_cast<double>(prefetched_)},
                 {"fsdp_reduce_scatters", static_cast<double>(reduce_scatters_)},
                 {"fsdp_gather_wait_ms", gather_wait_s_ * 1e3}};
  gathers_ = prefetched_ = reduce_scatters_ = 0;
  gather_wait_s_ = 0;
  return norm;
}

std::map<std::string, torch::Tensor> FsdpStrategy::gather_units(Held what) {
  std::map<std::string, torch::Tensor> gathered;
  for (auto& unit : units_) {
    std::vector<torch::Tensor> full = unit->gather_full(*group_, what);
    for (size_t i = 0; i < full.size(); ++i) gathered[unit->layout().parameters[i].name] = std::move(full[i]);
  }
  return gathered;
}

std::vector<std::pair<std::string, torch::Tensor>> FsdpStrategy::full_tensors(Held what) {
  std::map<std::string, torch::Tensor> gathered = gather_units(what);
  // In the model's parameter order, as every other strategy returns them.
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& item : model_->named_parameters()) out.emplace_back(item.key(), gathered.at(item.key()));
  return out;
}

std::vector<ShardEntry> FsdpStrategy::shard_entries() {
  std::vector<ShardEntry> entries;
  const int rank = group_->rank();
  for (auto& unit : units_) {
    for (size_t i = 0; i < unit->layout().parameters.size(); ++i) {
      const ShardedParameter& p = unit->layout().parameters[i];
      ShardEntry e;
      e.name = p.name;
      e.shape = p.shape;
      e.row_begin = p.row_begin(rank);
      e.row_end = p.row_end(rank);
      e.rows = unit->owned_rows(i);
      auto it = optimizer_->state().find(p.name);
      if (it != optimizer_->state().end()) e.state = &it->second;
      entries.push_back(std::move(e));
    }
  }
  return entries;
}

void FsdpStrategy::save_state(const std::string& dir) {
  write_shard_file(dir, group_->rank(), group_->size(), shard_entries());
  barrier(*group_).wait();
  if (group_->rank() == 0) write_shard_index(dir, group_->size(), shard_entries(), *config_);
  barrier(*group_).wait();
}

void FsdpStrategy::load_state(const std::string& dir) {
  auto reader = CheckpointRows::open(dir, parameter_shapes());
  std::map<std::string, AdamWState> state;
  for_each_owned([&](FsdpUnit& unit, size_t i, const ShardedParameter& p, int64_t begin, int64_t end) {
    torch::Tensor rows = unit.owned_rows(i);
    rows.copy_(reader->rows(p.name, begin, end));
    if (auto s = reader->optimizer_rows(p.name, begin, end, rows)) state[p.name] = std::move(*s);
  });
  optimizer_->state() = std::move(state);
}

void FsdpStrategy::save_blocks(const std::string& dir, Group& world, const ParameterShapes& full_shapes,
                               const models::ParameterShards& shards,
                               const std::function<bool(const std::string&)>& writes) {
  TpCheckpointWriter writer;
  for_each_owned([&](FsdpUnit& unit, size_t i, const ShardedParameter& p, int64_t begin, int64_t end) {
    if (!writes(p.name)) return;
    auto s = optimizer_->state().find(p.name);
    writer.add(shards, p.name, p.shape, begin, end, unit.owned_rows(i),
               s == optimizer_->state().end() ? nullptr : &s->second);
  });
  writer.write(dir, world, full_shapes, *config_);
}

void FsdpStrategy::load_blocks(const std::string& dir, const ParameterShapes& full_shapes,
                               const models::ParameterShards& shards) {
  auto reader = CheckpointRows::open(dir, full_shapes);
  std::map<std::string, AdamWState> state;
  for_each_owned([&](FsdpUnit& unit, size_t i, const ShardedParameter& p, int64_t begin, int64_t end) {
    torch::Tensor rows = unit.owned_rows(i);
    LocalRows read = read_tp_rows(*reader, p.name, shards, begin, end, rows);
    rows.copy_(read.values);
    if (read.state) state[p.name] = std::move(*read.state);
  });
  optimizer_->state() = std::move(state);
}

MemoryAccounting FsdpStrategy::memory() const {
  MemoryAccounting m;
  for (const auto& unit : units_) {
    m.parameter_bytes += unit->shard_bytes();
    m.gradient_bytes += unit->shard_bytes();  // the sharded gradient of a step, same dtype as the shard
  }
  for (const auto& [name, s] : optimizer_->state()) {
    m.optimizer_bytes += 2 * s.exp_avg.numel() * static_cast<int64_t>(s.exp_avg.element_size());
  }
  m.unsharded_peak_bytes = unsharded_peak_bytes_;
  return m;
}

std::map<std::string, double> FsdpStrategy::step_stats() const { return last_stats_; }

}  // namespace ddx::train
