#include "observe/straggler_watch.h"

#include <algorithm>
#include <cstdio>

#include "ddx/watchdog/job_events.h"

namespace ddx::train {
namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string StragglerWatch::observe(int64_t step, const std::vector<double>& busy_s, double now_s) {
  if (factor_ <= 0 || busy_s.size() < 2) return "";
  if (!window_.empty() && window_.front().busy_s.size() != busy_s.size()) window_.clear();
  window_.push_back({now_s, busy_s});
  // Keep the shortest tail that is still a full window.
  while (static_cast<int>(window_.size()) > min_steps_ && now_s - window_[1].at_s >= min_seconds_) window_.pop_front();
  // The first sample's time is when that step was logged, so its step began before it: the span
  // counts from it, a step short of the truth, on the safe side.
  if (static_cast<int>(window_.size()) < min_steps_ || now_s - window_.front().at_s < min_seconds_) return "";

  std::vector<double> mean(busy_s.size(), 0.0);
  for (const Sample& s : window_) {
    for (size_t r = 0; r < mean.size(); ++r) mean[r] += s.busy_s[r] / static_cast<double>(window_.size());
  }
  std::vector<double> sorted = mean;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[(sorted.size() - 1) / 2];  // the lower middle: with 2 ranks, the faster
  const int slowest = static_cast<int>(std::max_element(mean.begin(), mean.end()) - mean.begin());
  if (median <= 0 || mean[slowest] <= factor_ * median) {
    warned_ = false;
    return "";
  }
  if (warned_) return "";
  warned_ = true;
  events::Event("straggler.warning")
      .number("step", step)
      .number("rank", slowest)
      .real("ratio", mean[slowest] / median)
      .emit();
  return "straggler: rank " + std::to_string(slowest) + " was " + fixed(mean[slowest] / median, 1) +
         "x slower than the median rank (" + fixed(mean[slowest] * 1e3, 1) + " ms vs " + fixed(median * 1e3, 1) +
         " ms busy per step over the last " + std::to_string(window_.size()) + " logged steps, " +
         fixed(now_s - window_.front().at_s, 1) + " s), up to step " + std::to_string(step);
}

}  // namespace ddx::train
