#pragma once
// What the tests of `ddx train` against PyTorch's own parallel training share
// (fsdp_reference_test, tp_reference_test): a scratch folder with a dataset of exactly one
// global batch, ddx's initial weights, running ddx and a tests/python reference script to
// completion with nothing left behind, and comparing per-step losses, gradient norms and final
// weights.
//
// The weights: ddx writes its initialisation for --seed 7 with one step at --lr 0 (AdamW then
// changes nothing); every strategy builds the same weights from the same seed (layout-
// independent init) and the reference loads that file. The batches: the dataset holds exactly
// one global batch of blocks (byte tokenizer), so every step trains on all blocks and neither
// side's result depends on which rank reads which block; the sampler's shuffle only changes
// summation order.
//
// The precision: both sides train in float64 (ddx's --dtype fp64, the reference's --dtype fp64),
// so that rounding separates them by float64's epsilon and anything larger is a difference in
// what they compute (issue 27: in float32, rounding alone moved the gradient norm by 2.4e-5 on
// one CPU and not on another). The initial weights stay float32 (ddx's initialisation draws
// float32 values at any --dtype); both sides widen the same values exactly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {

// `blocks` blocks of seq_length + 1 tokens under the byte tokenizer ((tokens - 1) / T blocks):
// ASCII words from a fixed LCG, ending with the newline ddx would otherwise append.
std::string one_global_batch_of_text(int blocks, int seq_length);

struct Tolerances {
  double loss_rtol;           // every step's loss, relative
  double grad_norm_rtol;      // every step's global gradient norm, relative
  double weight_tol_of_scale;  // final weights: max difference / largest weight (train_test's measure)
};

// The tolerances of a float64 comparison: float64's machine epsilon 2.2e-16 times the growth
// rounding has over 20 steps. The growth: the same comparisons in float32 differed by 3.8 and
// 200 times float32's epsilon (1.2e-7) in the loss (4.5e-7) and the gradient norm (2.4e-5;
// issue 27). A rounding difference carried through AdamW grows in proportion to the first
// one, so in float64 that is 200 x 2.2e-16 = 4.4e-14; PyTorch's own layouts of these models
// (single device, TP, TP+SP, PP, FSDP2) measured against each other in float64 differ by at
// most 3.7e-16 (loss), 1.5e-14 (gradient norm) and 1.6e-14 (weights) over 20 steps.
// - loss, gradient norm: 1e-10 relative = 2.2e-16 x 4.5e5, 2000x the growth above (room for
//   any CPU kernel path), while a token count, a gradient summed twice or a learning rate off
//   by 0.1 % moves them by 1e-6 or more within a few steps.
// - final weights: 1e-10 of the largest weight (about 1, the norms' gains). AdamW moves a weight
//   by up to lr per step whatever its gradient's size, so rounding shows most where the gradient
//   itself is rounding (GPT-2's key bias: softmax ignores a shift, so its gradient is
//   mathematically zero; the worst tensor between PyTorch's layouts, 9.5e-6 in float32 and
//   1.6e-14 in float64). float32's worst in ddx's parity suite, 1.3e-4 (issue 27), is 2.4e-13
//   at float64's epsilon: 1e-10 = 2.2e-16 x 4.5e5 is 400x that, and 3e4x below what every step
//   at a learning rate 0.1 % off moves a weight (1e-3 x lr 3e-3 = 3e-6).
inline constexpr Tolerances kFloat64Tolerances{1e-10, 1e-10, 1e-10};

class ReferenceRunTest : public ::testing::Test {
 protected:
  // `model`: ddx's -m (a preset or a config.json); `global_batch` sequences of `seq_length`.
  ReferenceRunTest(std::string suite, std::string model, int global_batch, int seq_length, int steps)
      : suite_(std::move(suite)), model_(std::move(model)), global_batch_(global_batch),
        seq_length_(seq_length), steps_(steps) {}

  void SetUp() override;
  void TearDown() override;

  // Runs argv to completion (hard timeout), then requires that nothing it started is left.
  RunResult run(const std::string& name, std::vector<std::string> argv);

  // `ddx train` on the dataset and model, metrics of every step in <name>.jsonl.
  std::vector<std::string> ddx_train(const std::string& name, std::vector<std::string> extra) const;

  // `ddx launch` of ddx_train on `ranks` ranks in float64 at --lr 3e-3 for the test's steps,
  // final weights in <name>.safetensors; one rank runs ddx train directly.
  RunResult run_ddx(const std::string& name, int ranks, std::vector<std::string> flags);

  // ddx's initial weights (init.safetensors, float32).
  void make_initial_weights();

  // tests/python/<script> from init.safetensors at ddx's settings, float64; its record (and final
  // weights in <name>.safetensors) as it wrote them.
  void run_reference(const std::string& name, const std::string& script, std::vector<std::string> flags);

  // ddx's metrics <ours>.jsonl and final weights against the reference <theirs>'s record and
  // weights (both float64); `label` names the reference in failure messages.
  void expect_matches(const std::string& ours, const std::string& theirs, const std::string& label,
                      const Tolerances& tol);

  std::string path(const std::string& file) const { return dir_ + "/" + file; }

  std::string suite_, model_;
  int global_batch_, seq_length_, steps_;
  double min_loss_drop_ = 0.2;  // expect_matches: the reference's last loss below (1 - this) x its first
  std::string dir_, data_;
};

}  // namespace ddx::testing
