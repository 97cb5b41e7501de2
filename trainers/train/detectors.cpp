#include "train/detectors.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "ddx/checksum.h"
#include "ddx/collectives.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/process_group.h"
#include "ddx/text/text.h"
#include "strategies/strategy.h"

namespace ddx::train {
namespace {

int64_t row_checksum(const int64_t* values, int64_t n) {
  Fnv1a64 h;
  h.update(values, static_cast<size_t>(n) * sizeof(int64_t));
  int64_t as_signed = 0;
  const uint64_t digest = h.digest();
  std::memcpy(&as_signed, &digest, sizeof(digest));
  return as_signed;
}

// `mine` (int64) from every rank of `group`, concatenated in group order, on every rank. Each row
// travels with its own checksum: a detector must not be fooled by the corruption it looks for,
// so a rank whose all-gather delivers a row that does not match says so and names itself.
std::vector<int64_t> gather(Group& group, const torch::Tensor& mine) {
  const int64_t n = mine.numel();
  auto row = torch::empty({n + 1}, torch::kInt64);
  row.narrow(0, 0, n).copy_(mine);
  row[n] = row_checksum(row.data_ptr<int64_t>(), n);
  auto all = torch::zeros({group.size() * (n + 1)}, torch::kInt64);
  all_gather(group, all, row).wait();
  std::vector<int64_t> out;
  for (int r = 0; r < group.size(); ++r) {
    const int64_t* values = all.data_ptr<int64_t>() + r * (n + 1);
    if (row_checksum(values, n) != values[n]) {
      throw std::runtime_error("the detectors' own all-gather on rank " + std::to_string(group.global_rank(group.rank())) +
                               " delivered a corrupt row from rank " + std::to_string(group.global_rank(r)) +
                               ": this rank's collectives return corrupt results");
    }
    out.insert(out.end(), values, values + n);
  }
  return out;
}

}  // namespace

std::string check_gradients_finite(Strategy& strategy, Group& world, int64_t step) {
  const auto parameters = strategy.local_parameters();
  int64_t first_bad = -1;
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> finite;
    for (const auto& [name, p] : parameters) {
      finite.push_back(p.grad().defined() ? torch::isfinite(p.grad()).all()
                                          : torch::ones({}, torch::TensorOptions().dtype(torch::kBool).device(p.device())));
    }
    if (!finite.empty()) {
      auto bad = torch::logical_not(torch::stack(finite)).to(torch::kCPU);  // one device sync
      if (bad.any().item<bool>()) first_bad = bad.to(torch::kInt64).argmax().item<int64_t>();
    }
  }
  const std::vector<int64_t> all = gather(world, torch::tensor({first_bad}, torch::kInt64));
  std::vector<int> ranks;
  int64_t index = -1;  // the first bad parameter of the lowest bad rank
  for (int r = 0; r < world.size(); ++r) {
    if (all[r] < 0) continue;
    if (ranks.empty()) index = all[r];
    ranks.push_back(world.global_rank(r));
  }
  if (ranks.empty()) return "";
  events::Event("nan_check.nonfinite").number("step", step).number("first_rank", ranks.front()).ranks("ranks", ranks).emit();
  // Every rank's strategy lists the same names in the same order (replicas, or the same local
  // names of each rank's shard), so the index names the parameter on every rank.
  const std::string parameter = index < static_cast<int64_t>(parameters.size()) ? parameters[index].first
                                                                                 : "#" + std::to_string(index);
  return "step " + std::to_string(step) + ": non-finite gradient first on rank " + std::to_string(ranks.front()) +
         ", parameter " + parameter + " (non-finite on " + ranks_text(ranks) + ")";
}

void drop_gradients(Strategy& strategy) {
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : strategy.local_parameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

namespace {

// FNV-1a of each tensor's bytes, bit-cast to int64 for a collective.
std::vector<int64_t> checksums(const std::vector<torch::Tensor>& tensors) {
  std::vector<int64_t> out;
  for (const torch::Tensor& tensor : tensors) {
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    Fnv1a64 h;
    h.update(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
    const uint64_t digest = h.digest();
    int64_t as_signed = 0;
    std::memcpy(&as_signed, &digest, sizeof(digest));
    out.push_back(as_signed);
  }
  return out;
}

// Compares `sums` (one per name, the same names in the same order on every member) across
// `group`; `copy` names what each member holds ("data-parallel replica"). "" when all agree.
std::string compare_copies(Group& group, const std::vector<std::string>& names, const std::vector<int64_t>& sums,
                           int64_t step, const std::string& copy) {
  if (group.size() < 2 || names.empty()) return "";
  const std::vector<int64_t> all = gather(group, torch::tensor(sums, torch::kInt64));
  const size_t n = names.size();
  for (size_t i = 0; i < n; ++i) {
    std::map<int64_t, std::vector<int>> by_value;  // checksum -> global ranks holding it
    for (int r = 0; r < group.size(); ++r) by_value[all[r * n + i]].push_back(group.global_rank(r));
    if (by_value.size() == 1) continue;
    const auto majority = std::max_element(by_value.begin(), by_value.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    std::vector<int> diverging;
    for (const auto& [value, ranks] : by_value) {
      if (&ranks != &majority->second) diverging.insert(diverging.end(), ranks.begin(), ranks.end());
    }
    std::sort(diverging.begin(), diverging.end());
    const bool clear = majority->second.size() > diverging.size();
    events::Event("replica_check.diverged")
        .number("step", step)
        .text("copies", copy)
        .ranks("ranks", diverging)
        .number("majority", clear ? 1 : 0)
        .text("parameter", names[i])
        .emit();
    return "step " + std::to_string(step) + ": " + copy + (diverging.size() > 1 ? "s" : "") + " on " +
           ranks_text(diverging) +
           (clear ? " diverge" + std::string(diverging.size() > 1 ? "" : "s") + " from the other " +
                        std::to_string(majority->second.size()) + " in parameter "
                  : " and " + ranks_text(majority->second) + " disagree (no majority) in parameter ") +
           names[i];
  }
  return "";
}

}  // namespace

std::string check_replicas(Strategy& strategy, Group& world, int64_t step) {
  const auto owned = strategy.owned_parameters();
  // Each group of copies in the order the parameters name them (the same on every rank).
  std::vector<Group*> groups;
  bool some_alone = false;
  for (const auto& p : owned) {
    if (!p.copies) some_alone = true;
    if (p.copies && std::find(groups.begin(), groups.end(), p.copies) == groups.end()) groups.push_back(p.copies);
  }
  for (Group* group : groups) {
    std::vector<std::string> names;
    std::vector<torch::Tensor> tensors;
    for (const auto& p : owned) {
      if (p.copies != group) continue;
      names.push_back(p.name);
      tensors.push_back(p.tensor);
    }
    // Replicas over the data-parallel group, or the parameters TP leaves whole on every rank.
    const std::string copy = group == strategy.dp_group() ? "data-parallel replica" : "tensor-parallel replica";
    if (std::string finding = compare_copies(*group, names, checksums(tensors), step, copy); !finding.empty()) {
      return finding;
    }
  }
  if (!some_alone || world.size() < 2) return "";
  // Storage without a copy: what every rank gathers of it must still be the same everywhere.
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
  for (auto& [name, tensor] : strategy.full_parameters()) {
    names.push_back(name);
    tensors.push_back(tensor);
  }
  return compare_copies(world, names, checksums(tensors), step, "gathered replica");
}

void ParameterSeal::record(Strategy& strategy, int64_t step) {
  sums_.clear();
  bool some_alone = false;  // the same on every rank: nothing to verify (no collective) without
  for (const auto& p : strategy.owned_parameters()) {
    sums_.push_back(p.copies ? 0 : checksums({p.tensor})[0]);
    some_alone = some_alone || !p.copies;
  }
  step_ = some_alone ? step : 0;
}

std::string ParameterSeal::verify(Strategy& strategy, Group& world, int64_t step) {
  const auto owned = strategy.owned_parameters();
  int64_t first_changed = -1;
  for (size_t i = 0; i < owned.size() && i < sums_.size() && first_changed < 0; ++i) {
    if (!owned[i].copies && checksums({owned[i].tensor})[0] != sums_[i]) first_changed = static_cast<int64_t>(i);
  }
  const int64_t sealed = step_;
  step_ = 0;
  const std::vector<int64_t> all = gather(world, torch::tensor({first_changed}, torch::kInt64));
  for (int r = 0; r < world.size(); ++r) {
    if (all[r] < 0) continue;
    // Every rank lists the same names in the same order, so the index names it here too.
    const std::string parameter = all[r] < static_cast<int64_t>(owned.size()) ? owned[all[r]].name
                                                                              : "#" + std::to_string(all[r]);
    return "step " + std::to_string(step) + ": rank " + std::to_string(world.global_rank(r)) + "'s own storage of parameter " +
           parameter + " (no other rank holds a copy) changed after the update of step " + std::to_string(sealed) +
           " wrote it";
  }
  return "";
}

}  // namespace ddx::train
