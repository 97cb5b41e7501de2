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

  // `ddx launch` of ddx_train on `ranks` ranks at --lr 3e-3 for the test's steps, final
  // weights in <name>.safetensors; one rank runs ddx train directly.
  RunResult run_ddx(const std::string& name, int ranks, std::vector<std::string> flags);

  // ddx's initial weights (init.safetensors).
  void make_initial_weights();

  // tests/python/<script> from init.safetensors at ddx's settings; its record (and final weights
  // in <name>.safetensors) as it wrote them.
  void run_reference(const std::string& name, const std::string& script, std::vector<std::string> flags);

  // ddx's metrics <ours>.jsonl and final weights against the reference <theirs>'s record and
  // weights; `label` names the reference in failure messages.
  void expect_matches(const std::string& ours, const std::string& theirs, const std::string& label,
                      const Tolerances& tol);

  std::string path(const std::string& file) const { return dir_ + "/" + file; }

  std::string suite_, model_;
  int global_batch_, seq_length_, steps_;
  std::string dir_, data_;
};

}  // namespace ddx::testing
