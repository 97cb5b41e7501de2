#include "train/detectors.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "ddx/checksum.h"
#include "ddx/collectives.h"
#include "ddx/process_group.h"
#include "ddx/text.h"
#include "train/strategy.h"

namespace ddx::train {
namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// One value per rank of `group`, gathered on every rank.
std::vector<int64_t> gather(Group& group, const torch::Tensor& mine) {
  auto all = torch::zeros({group.size() * mine.numel()}, torch::kInt64);
  all_gather(group, all, mine).wait();
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
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

std::string check_replicas(Strategy& strategy, Group& dp, int64_t step) {
  const auto parameters = strategy.local_parameters();
  if (dp.size() < 2 || parameters.empty()) return "";
  auto mine = torch::empty({static_cast<int64_t>(parameters.size())}, torch::kInt64);
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto t = parameters[i].second.detach().to(torch::kCPU).contiguous();
    Fnv1a64 h;
    h.update(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
    const uint64_t digest = h.digest();
    int64_t as_signed = 0;
    std::memcpy(&as_signed, &digest, sizeof(digest));
    mine[static_cast<int64_t>(i)] = as_signed;
  }
  const std::vector<int64_t> all = gather(dp, mine);
  const size_t n = parameters.size();
  for (size_t i = 0; i < n; ++i) {
    std::map<int64_t, std::vector<int>> by_value;  // checksum -> global ranks holding it
    for (int r = 0; r < dp.size(); ++r) by_value[all[r * n + i]].push_back(dp.global_rank(r));
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
    return "step " + std::to_string(step) + ": data-parallel replica" + (diverging.size() > 1 ? "s" : "") + " on " +
           ranks_text(diverging) +
           (clear ? " diverge" + std::string(diverging.size() > 1 ? "" : "s") + " from the other " +
                        std::to_string(majority->second.size()) + " in parameter "
                  : " and " + ranks_text(majority->second) + " disagree (no majority) in parameter ") +
           parameters[i].first;
  }
  return "";
}

std::string StragglerWatch::observe(int64_t step, const std::vector<double>& busy_s) {
  if (factor_ <= 0 || busy_s.size() < 2) return "";
  std::vector<double> sorted = busy_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[(sorted.size() - 1) / 2];  // the lower middle: with 2 ranks, the faster
  const int slowest = static_cast<int>(std::max_element(busy_s.begin(), busy_s.end()) - busy_s.begin());
  if (median <= 0 || busy_s[slowest] <= factor_ * median) {
    streak_ = 0;
    return "";
  }
  streak_ = slowest == rank_ ? streak_ + 1 : 1;
  rank_ = slowest;
  if (streak_ != patience_) return "";
  return "straggler: rank " + std::to_string(slowest) + " was " + fixed(busy_s[slowest] / median, 1) +
         "x slower than the median rank (" + fixed(busy_s[slowest] * 1e3, 1) + " ms vs " + fixed(median * 1e3, 1) +
         " ms busy per step) for " + std::to_string(patience_) + " logged steps in a row, up to step " +
         std::to_string(step);
}

}  // namespace ddx::train
