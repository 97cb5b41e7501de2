#include "harness/parity/tensor_files.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "models/safetensors.h"

namespace ddx::parity {
namespace {

using Tensors = std::map<std::string, torch::Tensor>;

Tensors read_all(const std::string& path) {
  Tensors out;
  for (const auto& [name, info] : models::read_safetensors_index(path)) out[name] = models::read_tensor(info).to(torch::kFloat64);
  return out;
}

}  // namespace

TensorFilesDiff diff_tensor_files(const std::string& baseline_path, const std::string& run_path) {
  const Tensors base = read_all(baseline_path), run = read_all(run_path);
  TensorFilesDiff d;
  bool worst_final = false;  // a non-finite difference named the worst tensor for good
  for (const auto& [name, b] : base) {
    auto it = run.find(name);
    if (it == run.end() || it->second.sizes() != b.sizes()) {
      d.missing = name;
      if (!worst_final) d.worst_rel = INFINITY, d.worst_name = name + " (missing or another shape)";
      return d;
    }
    const double diff = (it->second - b).abs().max().item<double>();
    const double scale = b.abs().max().item<double>();
    // A NaN difference leaves the largest as it was (std::max keeps its first argument).
    d.max_abs_diff = std::max(d.max_abs_diff, diff);
    d.max_abs_baseline = std::max(d.max_abs_baseline, scale);
    if (worst_final) continue;
    const double rel = diff == 0 ? 0 : scale == 0 ? INFINITY : diff / scale;
    if (!std::isfinite(diff)) {
      d.worst_rel = INFINITY, d.worst_name = name, worst_final = true;
      continue;
    }
    if (rel > d.worst_rel || d.worst_name.empty()) d.worst_rel = rel, d.worst_name = name;
  }
  return d;
}

}  // namespace ddx::parity
