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

// What a run must agree with the baseline to (docs/parity.md derives each number).
struct Tolerances {
  // Per step, the loss and the gradient norm, relative.
  double loss_rel = 1e-5;
  // The full gradients of step 1 (identical weights, so rounding is the only difference), per
  // tensor max |g - g_base| / max |g_base|; 0 skips nothing: it demands equality.
  double grads_rel = 5e-6;
  // Final weights: max |w - w_base| in units of the largest single step AdamW can take
  // (largest_adam_step()). Rounding changes the direction of a step only for weights whose
  // gradient is itself at the rounding level, by a few percent of one step, and that does not
  // add up over a short run; a weight that missed or doubled an update is off by a whole step.
  double weight_steps = 0.25;
  // With a rounding envelope, each per-step tolerance (and the weights') is at least this many
  // times what rounding alone moved that step in the envelope's runs.
  double envelope_factor = 10;
};

// How far rounding alone moves one model's training on this machine and kernel path: the
// single-device run again with its batch split into micro-steps, which changes only the order
// of the sums. Per step, the relative loss and gradient-norm differences from the baseline
// (the largest over the envelope's runs), and the final weights' difference in units of
// AdamW's largest step. A step where the arithmetic is ill-conditioned (a gradient spike) shows a
// large difference here too, so a correct layout is never failed on it.
struct RoundingEnvelope {
  std::vector<double> loss, grad_norm;
  double weights = 0;
  bool empty() const { return loss.empty(); }
};

// The files a run leaves for the comparison (empty: not compared).
struct RunFiles {
  std::string weights;  // final full parameters
  std::string grads;    // full gradients of step 1
};

struct Comparison {
  int64_t steps = 0;
  double max_rel_loss_diff = 0;
  double max_rel_grad_norm_diff = 0;
  // First step whose loss or gradient norm differs by more than the tolerance (relative). The
  // gradient norm catches wrong gradients a step before the loss shows them, and also ones
  // Adam's scale invariance would hide from the loss for a while. Step-1 gradients that differ
  // make it 1 as well.
  int64_t first_bad_step = -1;
  std::vector<double> rel_loss_diff;  // per step
  std::vector<double> rel_grad_norm_diff;  // per step
  double grads_rel_diff = -1;         // step 1, worst tensor (-1: not compared)
  std::string grads_worst_tensor;
  double final_weight_max_abs_diff = 0;
  double final_weight_rel_diff = 0;   // max |a-b| / max |baseline| (reported, not judged)
  double final_weight_step_diff = 0;  // max |a-b| / largest_adam_step (judged)
  // The largest of each measure over its tolerance: below 1 passes; a planted bug shows how far
  // above the tolerance it lands, a healthy run how much room it leaves.
  double margin = 0;
  bool passed = false;
  std::string note;                   // why it failed, when it did
};

// The largest distance AdamW (beta1, beta2, bias-corrected) can move one weight in one of the
// steps whose learning rates are `lrs`: the largest lr_t * C_t, where C_t bounds
// |m_hat_t| / sqrt(v_hat_t) by Cauchy-Schwarz (1 at step 1, about 1.15 at step 20 for 0.9 /
// 0.999). Weight decay only pulls weights together, so it is left out.
double largest_adam_step(const std::vector<double>& lrs, double beta1 = 0.9, double beta2 = 0.999);

// The step-1 gradient tolerance for a training dtype: 5e-6 for fp32, scaled by the dtype's
// machine epsilon for others (fp64: 9.3e-15).
double default_grads_tolerance(const std::string& dtype);

// `envelope` (when not empty) widens each step's tolerance to envelope_factor times what
// rounding alone moved that step; never narrower than `tolerances`.
Comparison compare_runs(const std::vector<StepPoint>& baseline, const std::vector<StepPoint>& run,
                        const RunFiles& baseline_files, const RunFiles& run_files, const Tolerances& tolerances,
                        const RoundingEnvelope& envelope = {});

// The envelope of `references`' comparisons with the baseline (each made by compare_runs).
RoundingEnvelope rounding_envelope(const std::vector<Comparison>& references);

}  // namespace ddx::parity
