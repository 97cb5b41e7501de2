// `ddx train --strategy fsdp` against PyTorch's own FSDP2 (tests/python/fsdp2_reference.py:
// torch.distributed.fsdp.fully_shard on every block, then the root; Gloo, CPU, 2 ranks), run
// with the Python of the same torch wheel (DDX_PYTHON).
//
// Both sides train the debug GPT-2 for 20 steps in float64 from the same weights, on the same
// tokens, with the same loss normalisation (sum of token losses / global token count, gradients
// summed), AdamW and schedule (reference_run.h says how the weights and batches are made
// identical).
//
// Checks (kFloat64Tolerances: float64 rounding, derived in reference_run.h): every step's loss
// and global gradient norm within 1e-10 relative, final weights within 1e-10 of the largest
// weight (train_test's measure), and no process of either run left behind.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reference_run.h"

namespace ddx::testing {
namespace {

constexpr int kRanks = 2;
constexpr int kBatchPerRank = 4;

class FsdpReferenceTest : public ReferenceRunTest {
 protected:
  FsdpReferenceTest() : ReferenceRunTest("fsdp-reference", "debug", kRanks * kBatchPerRank, 32, 20) {}

  void run_fsdp2() {
    ASSERT_NO_FATAL_FAILURE(make_initial_weights());
    ASSERT_NO_FATAL_FAILURE(run_reference("reference", "fsdp2_reference.py",
                                          {"--batch-size", std::to_string(kBatchPerRank), "--nproc",
                                           std::to_string(kRanks)}));
  }

  RunResult run_fsdp(const std::string& name, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"--strategy", "fsdp", "-b", std::to_string(kBatchPerRank)});
    return run_ddx(name, kRanks, flags);
  }
};

TEST_F(FsdpReferenceTest, MatchesPyTorchFsdp2AtTwoRanks) {
  ASSERT_NO_FATAL_FAILURE(run_fsdp2());
  auto r = run_fsdp("ddx", {});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_matches("ddx", "reference", "PyTorch FSDP2", kFloat64Tolerances);
}

// Options that change when parameters are gathered and what is kept, never the arithmetic.
TEST_F(FsdpReferenceTest, ScheduleOptionsMatchPyTorchFsdp2) {
  ASSERT_NO_FATAL_FAILURE(run_fsdp2());
  auto r = run_fsdp("ddx_options", {"--no-reshard-after-forward", "--prefetch", "2", "--checkpoint-activations"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_matches("ddx_options", "reference", "PyTorch FSDP2", kFloat64Tolerances);
}

}  // namespace
}  // namespace ddx::testing
