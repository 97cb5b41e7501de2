// PyTorch's own tensor parallelism (tests/python/tp_reference.py: parallelize_module with
// ColwiseParallel / RowwiseParallel, SequenceParallel for the norms with --sequence-parallel,
// loss_parallel for the cross-entropy; Gloo, CPU, 2 ranks, run with the Python of the same torch
// wheel, DDX_PYTHON) against `ddx train --strategy tp --tp 2` (and `--sequence-parallel`),
// after the reference itself is proven against ddx's single-device run.
//
// Both sides train a small GPT-2 whose 4 heads split over 2 ranks and whose vocab (1001) and MLP
// width (137) no TP size divides, for 20 steps from the same weights, on the same tokens (every rank the whole
// batch), in float64, with the same loss normalisation, AdamW and schedule (reference_run.h says
// how the weights and batches are made identical). Checks: every step's loss and global gradient
// norm within 1e-10 relative, final weights within 1e-10 of the largest weight
// (kFloat64Tolerances: float64 rounding, derived in reference_run.h), no process left behind.

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "reference_run.h"

namespace ddx::testing {
namespace {

constexpr int kRanks = 2;
constexpr int kBatch = 8;  // sequences per step; with --tp 2 on 2 ranks every rank reads all of them

class TpReferenceTest : public ReferenceRunTest {
 protected:
  TpReferenceTest() : ReferenceRunTest("tp-reference", "", kBatch, 32, 20) {}

  void SetUp() override {
    ReferenceRunTest::SetUp();
    model_ = path("config.json");
    // The shape of ddx's debug-tp preset, as a file the reference reads too.
    std::ofstream(model_) << R"({"model_type": "gpt2", "activation_function": "gelu_new", "vocab_size": 1001,
  "n_embd": 48, "n_head": 4, "n_layer": 2, "n_inner": 137, "n_positions": 131, "layer_norm_epsilon": 1e-5})";
  }

  // Both variants end on a decayed learning rate (chosen when these ran in float32, whose
  // rounding drifts apart fastest where steps are large; the schedule is compared too). The
  // sequence-parallel one also clips (every step: the norm stays above 1) and decays weights.
  static std::vector<std::string> hyper_parameters(bool sp) {
    if (!sp) return {"--warmup-steps", "2", "--lr-decay-steps", "15"};
    return {"--max-grad-norm", "1", "--weight-decay", "0.1", "--lr-decay-steps", "15"};
  }

  // ddx's initial weights, then PyTorch TP (--sequence-parallel with `sp`) from them.
  void run_pytorch_tp(bool sp) {
    ASSERT_NO_FATAL_FAILURE(make_initial_weights());
    std::vector<std::string> flags = {"--batch-size", std::to_string(kBatch), "--nproc", std::to_string(kRanks)};
    if (sp) flags.push_back("--sequence-parallel");
    for (auto& f : hyper_parameters(sp)) flags.push_back(f);
    ASSERT_NO_FATAL_FAILURE(run_reference("reference", "tp_reference.py", flags));
  }

  // ddx train with `flags` on `ranks` ranks against PyTorch TP (+SP with `sp`).
  void expect_ddx_matches(bool sp, int ranks, std::vector<std::string> flags) {
    ASSERT_NO_FATAL_FAILURE(run_pytorch_tp(sp));
    flags.insert(flags.end(), {"-b", std::to_string(kBatch)});
    for (auto& f : hyper_parameters(sp)) flags.push_back(f);
    auto r = run_ddx("ddx", ranks, flags);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_matches("ddx", "reference", sp ? "PyTorch TP+SP" : "PyTorch TP", kFloat64Tolerances);
  }
};

// The reference itself, independent of ddx's TP: PyTorch's TP of this model is the
// single-device training, step by step.
TEST_F(TpReferenceTest, PyTorchTpMatchesDdxSingleDevice) { expect_ddx_matches(false, 1, {"--strategy", "single"}); }

TEST_F(TpReferenceTest, PyTorchTpSequenceParallelClippedMatchesDdxSingleDevice) {
  expect_ddx_matches(true, 1, {"--strategy", "single"});
}

// ddx's tensor parallelism against PyTorch's, with the same plan at 2 ranks: `--strategy tp
// --tp 2` (every rank reads the whole -b 8 batch), and with `--sequence-parallel`.
TEST_F(TpReferenceTest, MatchesPyTorchTpAtTwoRanks) {
  expect_ddx_matches(false, kRanks, {"--strategy", "tp", "--tp", std::to_string(kRanks)});
}

TEST_F(TpReferenceTest, SequenceParallelClippedMatchesPyTorchTpAtTwoRanks) {
  expect_ddx_matches(true, kRanks, {"--strategy", "tp", "--tp", std::to_string(kRanks), "--sequence-parallel"});
}

}  // namespace
}  // namespace ddx::testing
