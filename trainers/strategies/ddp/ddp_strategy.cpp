#include "strategies/ddp/ddp_strategy.h"

#include <torch/csrc/autograd/function_hook.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "ddx/checksum.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "observe/phase_timer.h"
#include "strategies/parallel_mesh.h"
#include "strategies/planted_bugs.h"

namespace ddx::train {
namespace {

// Fires after AccumulateGrad has written the parameter's .grad (libtorch-c10d.md §7): the
// gradient of this micro-step is complete.
class GradientReadyHook : public torch::autograd::FunctionPostHook {
 public:
  GradientReadyHook(DdpStrategy* strategy, int param) : strategy_(strategy), param_(param) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    strategy_->gradient_ready(param_);
    return outputs;
  }

 private:
  DdpStrategy* strategy_;
  int param_;
};

// Flattens tensors of one dtype into a buffer and back, for coalesced broadcasts.
torch::Tensor flatten(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.detach().reshape({-1}));
  return torch::cat(flat);
}
void unflatten_into(const torch::Tensor& flat, std::vector<torch::Tensor>& ts) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& t : ts) {
    t.detach().copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace

// Data parallel over the whole world: the mesh has no dimension but dp.
void DdpStrategy::setup(const StrategyContext& c) { setup_on(c, *build_parallel_mesh(c).dp, {}); }

void DdpStrategy::setup_on(const StrategyContext& c, Group& group, const models::TensorParallel& split) {
  build(c, split);
  group_ = &group;
  grad_as_bucket_view_ = options_.grad_as_bucket_view;
  zero1_ = options_.zero1;
  first_cap_bytes_ = megabytes_to_bytes(options_.first_bucket_mb);
  cap_bytes_ = megabytes_to_bytes(options_.bucket_cap_mb);
  start_from_rank0_weights(options_.verify_init);

  // Until gradients have been seen arriving, assume they arrive in reverse definition order
  // (the last layers first), as PyTorch's Reducer does.
  std::vector<int> order(parameters_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(order.size() - 1 - i);
  build_buckets(order);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(parameters_[i].second);
    acc->add_post_hook(std::make_unique<GradientReadyHook>(this, static_cast<int>(i)));
    accumulators_.push_back(std::move(acc));
  }
  if (zero1_) assign_zero1_owners();
}

void DdpStrategy::start_from_rank0_weights(bool verify_only) {
  if (verify_only) {
    // Every rank built the weights from the same seed: prove it instead of copying.
    Fnv1a64 h;
    for (const auto& [name, p] : parameters_) {
      auto c = p.detach().contiguous().to(torch::kCPU);
      h.update(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
    }
    auto mine = torch::tensor({static_cast<int64_t>(h.digest())}, torch::kInt64);
    auto all = torch::zeros({group_->size()}, torch::kInt64);
    all_gather(*group_, all, mine).wait();
    std::string differing;
    for (int r = 1; r < group_->size(); ++r) {
      if (all[r].item<int64_t>() != all[0].item<int64_t>()) differing += " " + std::to_string(r);
    }
    if (!differing.empty()) {
      throw UsageError("--verify-init: the initial weights of rank(s)" + differing + " differ from rank 0's");
    }
    return;
  }
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (auto& [name, p] : parameters_) by_dtype[p.scalar_type()].push_back(p);
  for (auto& [dtype, ts] : by_dtype) {
    torch::Tensor flat = flatten(ts);
    broadcast(*group_, flat, 0).wait();
    unflatten_into(flat, ts);
  }
}

void DdpStrategy::build_buckets(const std::vector<int>& order) {
  std::vector<torch::Tensor> params;
  for (auto& [name, p] : parameters_) params.push_back(p);
  buckets_ = assign_buckets(params, order, first_cap_bytes_, cap_bytes_);
  bucket_of_.assign(parameters_.size(), -1);
  slot_of_.assign(parameters_.size(), -1);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t s = 0; s < buckets_[b].slots.size(); ++s) {
      bucket_of_[buckets_[b].slots[s].param] = static_cast<int>(b);
      slot_of_[buckets_[b].slots[s].param] = static_cast<int>(s);
    }
  }
  if (grad_as_bucket_view_) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      for (const BucketSlot& slot : buckets_[b].slots) {
        torch::Tensor& p = parameters_[slot.param].second;
        p.mutable_grad() = buckets_[b].flat.narrow(0, slot.offset, slot.numel).view(p.sizes());
      }
    }
  }
  log::debug("ddp: ", parameters_.size(), " parameters in ", buckets_.size(), " buckets");
}

double DdpStrategy::forward_backward(const MicroBatch& batch, double loss_scale, bool last_micro,
                                     PhaseTimes& times) {
  models::LossSum loss;
  {
    PhaseTimer t(times.forward, device_, profile_scope::kForward);
    torch::Tensor logits = model_->forward(batch.inputs);
    loss = model_->loss_sum(logits, batch.labels);  // vocab-parallel under 2D
  }
  // no_sync for every micro-step but the last: gradients accumulate locally and the last
  // backward reduces the accumulated sum.
  sync_ = last_micro;
  if (sync_) {
    pending_.assign(buckets_.size(), 0);
    for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = static_cast<int>(buckets_[b].slots.size());
    arrived_.assign(parameters_.size(), false);
    next_to_launch_ = 0;
    works_.clear();
    buckets_in_backward_ = 0;
  }
  {
    PhaseTimer t(times.backward, device_, profile_scope::kBackward);
    in_backward_ = true;
    (loss.sum * loss_scale).backward();
    in_backward_ = false;
  }
  return loss.sum.item<double>();
}

void DdpStrategy::gradient_ready(int param) {
  if (!sync_ || arrived_[param]) return;
  arrived_[param] = true;
  if (!rebuilt_) arrival_order_.push_back(param);
  const int b = bucket_of_[param];
  const BucketSlot& slot = buckets_[b].slots[slot_of_[param]];
  torch::Tensor& p = parameters_[param].second;
  torch::Tensor view = buckets_[b].flat.narrow(0, slot.offset, slot.numel);
  torch::NoGradGuard no_grad;
  if (!(grad_as_bucket_view_ && p.grad().defined() && p.grad().data_ptr() == view.data_ptr())) {
    view.copy_(p.grad().reshape({-1}));
    // The accumulator replaced the view (e.g. it adopted the incoming gradient): alias again.
    if (grad_as_bucket_view_) p.mutable_grad() = view.view(p.sizes());
  }
  if (planted_bugs().scale_grad_rank == group_->rank()) view.mul_(planted_bugs().scale_grad_factor);  // on purpose
  if (--pending_[b] == 0) launch_ready_buckets();
}

void DdpStrategy::launch_ready_buckets() {
  // Strictly in bucket order, so every rank issues the same sequence of all-reduces.
  while (next_to_launch_ < buckets_.size() && pending_[next_to_launch_] == 0) launch_bucket(next_to_launch_++);
}

void DdpStrategy::launch_bucket(size_t b) {
  CallSite site(CallSite::current() + " ddp bucket " + std::to_string(b));
  if (in_backward_) ++buckets_in_backward_;
  if (static_cast<int>(b) == planted_bugs().skip_bucket) return;  // the bug, on purpose
  works_.push_back(all_reduce(*group_, buckets_[b].flat, ReduceOp::Sum));
}

double DdpStrategy::finish_gradients() {
  if (!sync_) return 0.0;
  // Parameters that got no gradient on this rank contribute zeros, so every rank still
  // launches every bucket.
  for (size_t b = next_to_launch_; b < buckets_.size(); ++b) {
    for (const BucketSlot& slot : buckets_[b].slots) {
      if (!arrived_[slot.param]) buckets_[b].flat.narrow(0, slot.offset, slot.numel).zero_();
    }
    pending_[b] = 0;
  }
  launch_ready_buckets();
  const auto t0 = std::chrono::steady_clock::now();
  for (Work& w : works_) w.wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  works_.clear();
  if (!grad_as_bucket_view_) {
    torch::NoGradGuard no_grad;
    for (const Bucket& bucket : buckets_) {
      for (const BucketSlot& slot : bucket.slots) {
        torch::Tensor& p = parameters_[slot.param].second;
        torch::Tensor reduced = bucket.flat.narrow(0, slot.offset, slot.numel).view(p.sizes());
        if (p.grad().defined()) p.mutable_grad().copy_(reduced);
        else p.mutable_grad() = reduced.clone();
      }
    }
  }
  if (planted_bugs().scale_grad_element_factor != 1.0 && parameters_[0].second.grad().defined()) {
    torch::NoGradGuard no_grad;  // the bug, on purpose: one element of the reduced gradient
    torch::Tensor flat = parameters_[0].second.mutable_grad().view({-1});
    const int64_t at = flat.abs().argmax().item<int64_t>();
    flat.narrow(0, at, 1).mul_(planted_bugs().scale_grad_element_factor);
  }
  return waited;
}

double DdpStrategy::optimizer_step(double lr, double max_grad_norm) {
  lr *= planted_bugs().lr_factor;  // 1 unless the lr-scale bug is planted
  const double norm = ReplicatedStrategy::optimizer_step(lr, max_grad_norm);
  if (!rebuilt_) rebuild_buckets_in_arrival_order();
  return norm;
}

void DdpStrategy::rebuild_buckets_in_arrival_order() {
  rebuilt_ = true;
  if (arrival_order_.size() != parameters_.size()) {
    // Some parameters never got a gradient: keep the initial layout.
    arrival_order_.clear();
    return;
  }
  // Rank 0's observed order, so every rank builds the same buckets.
  auto order = torch::tensor(std::vector<int64_t>(arrival_order_.begin(), arrival_order_.end()), torch::kInt64);
  broadcast(*group_, order, 0).wait();
  std::vector<int> agreed(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
  arrival_order_.clear();
  build_buckets(agreed);
}

void DdpStrategy::zero_gradients() {
  if (!grad_as_bucket_view_) return ReplicatedStrategy::zero_gradients();
  for (Bucket& b : buckets_) b.flat.zero_();
}

void DdpStrategy::assign_zero1_owners() {
  // Greedy by size in parameter order: deterministic, so every rank computes the same owners.
  std::vector<int64_t> load(group_->size(), 0);
  owner_.assign(parameters_.size(), 0);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner_[i] = r;
    load[r] += parameters_[i].second.numel();
  }
}

void DdpStrategy::apply_updates(double lr) {
  if (!zero1_) return ReplicatedStrategy::apply_updates(lr);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto& [name, p] = parameters_[i];
    if (owner_[i] != group_->rank() || !p.grad().defined()) continue;
    torch::Tensor param = p.detach();
    optimizer_->update(name, param, p.grad(), lr);
  }
  broadcast_owned_parameters();
}

void DdpStrategy::broadcast_owned_parameters() {
  // Each rank's updated parameters travel in one flat broadcast from their owner.
  for (int r = 0; r < group_->size(); ++r) {
    std::vector<torch::Tensor> owned;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (owner_[i] == r) owned.push_back(parameters_[i].second);
    }
    if (owned.empty()) continue;
    torch::Tensor flat = flatten(owned);
    broadcast(*group_, flat, r).wait();
    unflatten_into(flat, owned);
  }
}

void DdpStrategy::save_state(const std::string& dir) {
  if (!zero1_) return ReplicatedStrategy::save_state(dir);
  // Gather the sharded optimizer state so the checkpoint is the same as plain DDP's and loads
  // at any world size, with or without --zero1.
  std::map<std::string, AdamWState> full;
  for (int r = 0; r < group_->size(); ++r) {
    std::vector<int> owned;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (owner_[i] == r) owned.push_back(static_cast<int>(i));
    }
    if (owned.empty()) continue;
    std::vector<torch::Tensor> avg, sq;
    std::vector<int64_t> steps;
    for (int i : owned) {
      const auto& [name, p] = parameters_[i];
      auto it = optimizer_->state().find(name);
      const bool have = it != optimizer_->state().end();
      avg.push_back(have ? it->second.exp_avg : torch::zeros_like(p));
      sq.push_back(have ? it->second.exp_avg_sq : torch::zeros_like(p));
      steps.push_back(have ? it->second.step : 0);
    }
    torch::Tensor flat_avg = flatten(avg), flat_sq = flatten(sq);
    torch::Tensor flat_steps = torch::tensor(steps, torch::kInt64);
    broadcast(*group_, flat_avg, r).wait();
    broadcast(*group_, flat_sq, r).wait();
    broadcast(*group_, flat_steps, r).wait();
    if (group_->rank() != 0) continue;
    int64_t offset = 0;
    for (size_t k = 0; k < owned.size(); ++k) {
      const auto& [name, p] = parameters_[owned[k]];
      const int64_t step = flat_steps[static_cast<int64_t>(k)].item<int64_t>();
      if (step > 0) {
        AdamWState s;
        s.step = step;
        s.exp_avg = flat_avg.narrow(0, offset, p.numel()).view(p.sizes()).clone();
        s.exp_avg_sq = flat_sq.narrow(0, offset, p.numel()).view(p.sizes()).clone();
        full[name] = std::move(s);
      }
      offset += p.numel();
    }
  }
  if (group_->rank() == 0) {
    write_model_file(dir + "/model.safetensors", parameters_);
    write_optimizer_file(dir + "/optimizer.safetensors", full);
  }
  checkpoint_barrier();
}

void DdpStrategy::load_state(const std::string& dir) {
  ReplicatedStrategy::load_state(dir);
  if (!zero1_) return;
  // Keep only the state of the parameters this rank updates.
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (owner_[i] != group_->rank()) optimizer_->state().erase(parameters_[i].first);
  }
}

MemoryAccounting DdpStrategy::memory() const {
  MemoryAccounting m = ReplicatedStrategy::memory();
  // Buckets hold a second copy of the gradients unless .grad aliases them.
  if (!grad_as_bucket_view_) {
    for (const Bucket& b : buckets_) m.gradient_bytes += b.numel * static_cast<int64_t>(b.flat.element_size());
  }
  return m;
}

std::map<std::string, double> DdpStrategy::step_stats() const {
  return {{"ddp_buckets", static_cast<double>(buckets_.size())},
          {"ddp_buckets_launched_in_backward", static_cast<double>(buckets_in_backward_)}};
}

}  // namespace ddx::train
