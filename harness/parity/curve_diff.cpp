#include "harness/parity/curve_diff.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace ddx {

CurveDiff diff_curves(const std::vector<CurvePoint>& reference, const std::vector<CurvePoint>& run,
                      const std::function<PointTolerance(size_t)>& tolerance_at) {
  CurveDiff d;
  std::map<int64_t, double> by_step;
  for (const CurvePoint& p : run) by_step[p.step] = p.value;
  std::map<int64_t, bool> seen;
  for (const CurvePoint& ref : reference) {
    const auto it = by_step.find(ref.step);
    if (it == by_step.end()) {
      ++d.only_in_reference;
      continue;
    }
    seen[ref.step] = true;
    const size_t i = d.steps.size();
    double abs = std::fabs(it->second - ref.value);
    double rel = abs / std::max(std::fabs(ref.value), 1e-30);
    if (!std::isfinite(it->second)) abs = rel = INFINITY;
    d.steps.push_back(ref.step);
    d.abs_diff.push_back(abs);
    d.rel_diff.push_back(rel);
    if (abs > d.max_abs || d.max_abs_step < 0) {
      d.max_abs = std::max(d.max_abs, abs);
      if (abs >= d.max_abs) d.max_abs_step = ref.step;
    }
    d.max_rel = std::max(d.max_rel, rel);
    const PointTolerance t = tolerance_at(i);
    const double allowed = t.abs + t.rel * std::fabs(ref.value);
    const double ratio = abs == 0 ? 0.0 : allowed == 0 ? INFINITY : abs / allowed;
    d.margin = std::max(d.margin, ratio);
    if (ratio > 1 && d.first_bad_step < 0) d.first_bad_step = ref.step;
  }
  for (const CurvePoint& p : run) {
    if (!seen.count(p.step)) ++d.only_in_run;
  }
  return d;
}

}  // namespace ddx
