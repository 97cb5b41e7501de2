// PyTorch's own pipelining (tests/python/pp_reference.py: PipelineStage with ScheduleGPipe or
// Schedule1F1B, Gloo, CPU, 2 ranks, run with the Python of the same torch wheel, DDX_PYTHON)
// against `ddx train --strategy pp` on 2 ranks with the same cut (--pp-split), schedule and
// micro-batches, after the reference itself is proven against ddx's single-device run.
//
// Both sides train an 8-block GPT-2 with a tied embedding (held by both stages, gradients
// summed) for 20 steps in float64 from the same weights, on the same tokens, with the same loss
// normalisation, AdamW and schedule (reference_run.h says how the weights and batches are made
// identical). Checks: every step's loss and global gradient norm within 1e-10 relative, final
// weights within 1e-10 of the largest weight (kFloat64Tolerances: float64 rounding, derived in
// reference_run.h), no process left behind.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "reference_run.h"

namespace ddx::testing {
namespace {

constexpr int kRanks = 2;
constexpr int kBatch = 8;
constexpr int kMicrobatches = 4;
constexpr int kSplit = 4;  // first block of stage 1

class PpReferenceTest : public ReferenceRunTest {
 protected:
  PpReferenceTest() : ReferenceRunTest("pp-reference", "", kBatch, 32, 20) {}

  void SetUp() override {
    ReferenceRunTest::SetUp();
    model_ = path("config.json");
    // ddx's debug-pp preset, as a file the reference reads too.
    std::ofstream(model_) << R"({"model_type": "gpt2", "activation_function": "gelu_new", "vocab_size": 259, "n_embd": 35, "n_head": 5, "n_layer": 8,
  "n_inner": 137, "n_positions": 131, "layer_norm_epsilon": 1e-5})";
  }

  void run_pytorch_pp(const std::string& schedule) {
    ASSERT_NO_FATAL_FAILURE(make_initial_weights());
    ASSERT_NO_FATAL_FAILURE(run_reference("reference", "pp_reference.py",
                                          {"--batch-size", std::to_string(kBatch), "--microbatches",
                                           std::to_string(kMicrobatches), "--schedule", schedule, "--split",
                                           std::to_string(kSplit), "--nproc", std::to_string(kRanks),
                                           "--warmup-steps", "2", "--lr-decay-steps", "15"}));
  }

  void expect_ddx_matches(const std::string& schedule, int ranks, std::vector<std::string> flags) {
    ASSERT_NO_FATAL_FAILURE(run_pytorch_pp(schedule));
    flags.insert(flags.end(), {"-b", std::to_string(kBatch), "--warmup-steps", "2", "--lr-decay-steps", "15"});
    auto r = run_ddx("ddx", ranks, flags);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_matches("ddx", "reference", "PyTorch pipelining " + schedule, kFloat64Tolerances);
  }

  static std::vector<std::string> pp_flags(const std::string& schedule) {
    return {"--strategy", "pp", "--pp", std::to_string(kRanks), "--pp-schedule", schedule, "--microbatches",
            std::to_string(kMicrobatches), "--pp-split", std::to_string(kSplit)};
  }
};

// The reference itself, independent of ddx's pipeline: PyTorch's 1F1B of this model is the
// single-device training, step by step.
TEST_F(PpReferenceTest, PyTorchPipeliningMatchesDdxSingleDevice) {
  expect_ddx_matches("1f1b", 1, {"--strategy", "single"});
}

TEST_F(PpReferenceTest, GpipeMatchesPyTorchScheduleGPipeAtTwoRanks) {
  expect_ddx_matches("gpipe", kRanks, pp_flags("gpipe"));
}

TEST_F(PpReferenceTest, OneFOneBMatchesPyTorchSchedule1F1BAtTwoRanks) {
  expect_ddx_matches("1f1b", kRanks, pp_flags("1f1b"));
}

}  // namespace
}  // namespace ddx::testing
