#include "parity/curves.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "models/safetensors.h"

namespace ddx::parity {

StepPoint step_point(const nlohmann::json& j) {
  StepPoint p;
  p.step = j.at("step").get<int64_t>();
  p.loss = j.at("loss").get<double>();
  p.grad_norm = j.value("grad_norm", 0.0);
  p.lr = j.value("lr", 0.0);
  p.param_checksum = j.value("param_checksum", "");
  return p;
}

std::vector<StepPoint> read_curve(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("no metrics file " + path);
  std::vector<StepPoint> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    try {
      out.push_back(step_point(nlohmann::json::parse(line)));
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  return out;
}

Comparison compare_runs(const std::vector<StepPoint>& baseline, const std::vector<StepPoint>& run,
                        const std::string& baseline_weights, const std::string& run_weights,
                        double tolerance_rel, double weight_tolerance) {
  Comparison c;
  c.steps = static_cast<int64_t>(run.size());
  const size_t n = std::min(baseline.size(), run.size());
  for (size_t i = 0; i < n; ++i) {
    const double base = baseline[i].loss;
    double rel = std::fabs(run[i].loss - base) / std::max(std::fabs(base), 1e-30);
    if (!std::isfinite(run[i].loss)) rel = INFINITY;
    c.rel_loss_diff.push_back(rel);
    c.max_rel_loss_diff = std::max(c.max_rel_loss_diff, rel);
    double grad_rel = std::fabs(run[i].grad_norm - baseline[i].grad_norm) /
                      std::max(std::fabs(baseline[i].grad_norm), 1e-30);
    if (!std::isfinite(run[i].grad_norm)) grad_rel = INFINITY;
    c.max_rel_grad_norm_diff = std::max(c.max_rel_grad_norm_diff, grad_rel);
    if ((rel > tolerance_rel || grad_rel > tolerance_rel) && c.first_bad_step < 0) {
      c.first_bad_step = run[i].step;
      c.note = (rel > tolerance_rel ? "loss differs by " + std::to_string(rel)
                                    : "gradient norm differs by " + std::to_string(grad_rel)) +
               " (relative) at step " + std::to_string(run[i].step);
    }
  }
  if (run.size() != baseline.size()) {
    c.note = "ran " + std::to_string(run.size()) + " steps, the baseline " + std::to_string(baseline.size());
    return c;
  }
  if (!run_weights.empty() && !baseline_weights.empty()) {
    auto a = models::read_safetensors_index(run_weights);
    auto b = models::read_safetensors_index(baseline_weights);
    double max_base = 0;
    for (const auto& [name, info] : b) {
      auto it = a.find(name);
      if (it == a.end()) {
        c.note = "final weights lack " + name;
        return c;
      }
      auto x = models::read_tensor(it->second).to(torch::kFloat64);
      auto y = models::read_tensor(info).to(torch::kFloat64);
      c.final_weight_max_abs_diff = std::max(c.final_weight_max_abs_diff, (x - y).abs().max().item<double>());
      max_base = std::max(max_base, y.abs().max().item<double>());
    }
    c.final_weight_rel_diff = c.final_weight_max_abs_diff / std::max(max_base, 1e-30);
  }
  c.passed = c.first_bad_step < 0 && c.final_weight_rel_diff <= weight_tolerance;
  if (c.first_bad_step < 0 && !c.passed) {
    c.note = "final weights differ by " + std::to_string(c.final_weight_rel_diff) + " (relative)";
  }
  return c;
}

}  // namespace ddx::parity
