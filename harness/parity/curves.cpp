#include "harness/parity/curves.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

#include "harness/parity/curve_diff.h"
#include "harness/parity/tensor_files.h"

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

double largest_adam_step(const std::vector<double>& lrs, double beta1, double beta2) {
  // m_hat_t = (1-b1)/(1-b1^t) sum_k b1^k g_{t-k}, v_hat_t = (1-b2)/(1-b2^t) sum_k b2^k g_{t-k}^2;
  // Cauchy-Schwarz on sum_k (b1^k / b2^(k/2)) (b2^(k/2) g_{t-k}) gives
  // |m_hat| / sqrt(v_hat) <= (1-b1)/(1-b1^t) * sqrt((1-b2^t)/(1-b2) * sum_{k<t} (b1^2/b2)^k).
  double bound = 0, geometric = 0;
  for (size_t i = 0; i < lrs.size(); ++i) {
    const double t = static_cast<double>(i + 1);
    geometric += std::pow(beta1 * beta1 / beta2, t - 1);
    const double c = (1 - beta1) / (1 - std::pow(beta1, t)) * std::sqrt((1 - std::pow(beta2, t)) / (1 - beta2) * geometric);
    bound = std::max(bound, std::fabs(lrs[i]) * c);
  }
  return bound;
}

double default_grads_tolerance(const std::string& dtype) {
  const double fp32_eps = 1.1920928955078125e-7;  // 2^-23
  const double eps = dtype == "fp64" ? 2.220446049250313e-16 : dtype == "bf16" ? 7.8125e-3 : fp32_eps;
  return 5e-6 * eps / fp32_eps;  // 84 units of float32 roundoff (2^-24): docs/parity.md
}

Comparison compare_runs(const std::vector<StepPoint>& baseline, const std::vector<StepPoint>& run,
                        const RunFiles& baseline_files, const RunFiles& run_files, const Tolerances& tol,
                        const RoundingEnvelope& envelope) {
  Comparison c;
  // Step i's tolerance for a measure whose rounding envelope is `env`.
  auto step_tolerance = [&](const std::vector<double>& env, size_t i) {
    return i < env.size() ? std::max(tol.loss_rel, tol.envelope_factor * env[i]) : tol.loss_rel;
  };
  c.steps = static_cast<int64_t>(run.size());
  auto ratio = [](double value, double tolerance) {
    return value == 0 ? 0.0 : tolerance == 0 ? INFINITY : value / tolerance;
  };
  // The loss and the gradient norm, each step against the baseline's (harness/parity/curve_diff.h, the
  // comparison `ddx compare` makes too), relative tolerances widened per step by the envelope.
  auto curve = [](const std::vector<StepPoint>& points, double StepPoint::*field) {
    std::vector<CurvePoint> out;
    for (const StepPoint& p : points) out.push_back({p.step, p.*field});
    return out;
  };
  const CurveDiff loss = diff_curves(curve(baseline, &StepPoint::loss), curve(run, &StepPoint::loss),
                                     [&](size_t i) { return PointTolerance{0, step_tolerance(envelope.loss, i)}; });
  const CurveDiff grad = diff_curves(curve(baseline, &StepPoint::grad_norm), curve(run, &StepPoint::grad_norm),
                                     [&](size_t i) { return PointTolerance{0, step_tolerance(envelope.grad_norm, i)}; });
  c.rel_loss_diff = loss.rel_diff;
  c.rel_grad_norm_diff = grad.rel_diff;
  c.max_rel_loss_diff = loss.max_rel;
  c.max_rel_grad_norm_diff = grad.max_rel;
  c.margin = std::max(loss.margin, grad.margin);
  // The first bad step of either; at the same step the loss is named.
  const bool loss_first =
      loss.first_bad_step >= 0 && (grad.first_bad_step < 0 || loss.first_bad_step <= grad.first_bad_step);
  if (loss_first || grad.first_bad_step >= 0) {
    const CurveDiff& bad = loss_first ? loss : grad;
    c.first_bad_step = bad.first_bad_step;
    const size_t i = std::find(bad.steps.begin(), bad.steps.end(), bad.first_bad_step) - bad.steps.begin();
    c.note = (loss_first ? "loss differs by " : "gradient norm differs by ") + std::to_string(bad.rel_diff[i]) +
             " (relative) at step " + std::to_string(bad.first_bad_step);
  }
  if (run.size() != baseline.size()) {
    c.note = "ran " + std::to_string(run.size()) + " steps, the baseline " + std::to_string(baseline.size());
    return c;
  }
  if (!run_files.grads.empty() && !baseline_files.grads.empty()) {
    const TensorFilesDiff grads = diff_tensor_files(baseline_files.grads, run_files.grads);
    c.grads_rel_diff = grads.worst_rel;
    c.grads_worst_tensor = grads.worst_name;
    c.margin = std::max(c.margin, ratio(c.grads_rel_diff, tol.grads_rel));
    if (c.grads_rel_diff > tol.grads_rel) {
      c.first_bad_step = 1;  // before any update: the gradients themselves are wrong
      c.note = "step-1 gradient of " + c.grads_worst_tensor + " differs by " + std::to_string(c.grads_rel_diff) +
               " (relative to its largest element)";
    }
  }
  const double weight_tol =
      envelope.empty() ? tol.weight_steps : std::max(tol.weight_steps, tol.envelope_factor * envelope.weights);
  if (!run_files.weights.empty() && !baseline_files.weights.empty()) {
    const TensorFilesDiff weights = diff_tensor_files(baseline_files.weights, run_files.weights);
    c.final_weight_max_abs_diff = weights.max_abs_diff;  // up to a missing tensor, if any
    if (!weights.missing.empty()) {
      c.note = "final weights lack " + weights.missing + " (or it has another shape)";
      return c;
    }
    const double max_base = weights.max_abs_baseline;
    c.final_weight_rel_diff = c.final_weight_max_abs_diff / std::max(max_base, 1e-30);
    std::vector<double> lrs;
    for (const StepPoint& p : baseline) lrs.push_back(p.lr);
    const double step = largest_adam_step(lrs);
    c.final_weight_step_diff = c.final_weight_max_abs_diff == 0 ? 0 : c.final_weight_max_abs_diff / std::max(step, 1e-30);
    c.margin = std::max(c.margin, ratio(c.final_weight_step_diff, weight_tol));
  }
  c.passed = c.first_bad_step < 0 && c.final_weight_step_diff <= weight_tol;
  if (c.first_bad_step < 0 && !c.passed) {
    c.note = "final weights differ by " + std::to_string(c.final_weight_step_diff) + " of AdamW's largest step";
  }
  return c;
}

RoundingEnvelope rounding_envelope(const std::vector<Comparison>& references) {
  RoundingEnvelope e;
  auto widen = [](std::vector<double>& into, const std::vector<double>& from) {
    if (into.size() < from.size()) into.resize(from.size(), 0.0);
    for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
  };
  for (const Comparison& c : references) {
    widen(e.loss, c.rel_loss_diff);
    widen(e.grad_norm, c.rel_grad_norm_diff);
    e.weights = std::max(e.weights, c.final_weight_step_diff);
  }
  return e;
}

}  // namespace ddx::parity
