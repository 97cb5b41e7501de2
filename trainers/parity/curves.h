#pragma once
// A run's per-step record as the parity suite reads it from metrics.jsonl, and the comparison
// of a run with the baseline.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ddx::parity {

struct StepPoint {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  std::string param_checksum;
};

// One step's record: a metrics.jsonl line or a golden file's step (throws on missing fields).
StepPoint step_point(const nlohmann::json& record);

// Throws std::runtime_error naming the file when it is missing or malformed.
std::vector<StepPoint> read_curve(const std::string& metrics_path);

struct Comparison {
  int64_t steps = 0;
  double max_rel_loss_diff = 0;
  double max_rel_grad_norm_diff = 0;
  // First step whose loss or gradient norm differs by more than the tolerance (relative). The
  // gradient norm catches wrong gradients a step before the loss shows them, and also ones
  // Adam's scale invariance would hide from the loss for a while.
  int64_t first_bad_step = -1;
  std::vector<double> rel_loss_diff;  // per step
  double final_weight_max_abs_diff = 0;
  double final_weight_rel_diff = 0;   // max |a-b| / max |baseline|
  bool passed = false;
  std::string note;                   // why it failed, when it did
};

Comparison compare_runs(const std::vector<StepPoint>& baseline, const std::vector<StepPoint>& run,
                        const std::string& baseline_weights, const std::string& run_weights,
                        double tolerance_rel, double weight_tolerance);

}  // namespace ddx::parity
