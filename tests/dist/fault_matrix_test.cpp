// `ddx fault matrix` end to end (CTest label `faults`): every row passes on a 4-rank DDP job;
// with a detector turned off its row fails and the matrix exits non-zero (the matrix can fail);
// a kill at step 13 with checkpoints every 5 steps recovers bit-identically under every strategy.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

struct Matrix {
  std::string dir;
  RunResult result;
  nlohmann::json report;
};

Matrix run_matrix(const std::string& tag, std::vector<std::string> args, int timeout_s) {
  Matrix m;
  m.dir = scratch_dir("fault-matrix", tag);
  std::vector<std::string> argv = {DDX_BIN, "fault", "matrix", "--out", m.dir + "/out"};
  argv.insert(argv.end(), args.begin(), args.end());
  m.result = run_in(m.dir, argv, {}, timeout_s);
  std::ifstream in(m.dir + "/out/report.json");
  if (in) m.report = nlohmann::json::parse(in);
  EXPECT_TRUE(processes_left(m.dir).empty()) << "processes left behind by " << tag;
  return m;
}

const nlohmann::json& row(const Matrix& m, const std::string& kind) {
  static const nlohmann::json none;
  for (const auto& r : m.report.at("rows")) {
    if (r.at("kind") == kind) return r;
  }
  ADD_FAILURE() << "no row " << kind;
  return none;
}

TEST(FaultMatrix, EveryRowPassesOnDdp) {
  Matrix m = run_matrix("ddp", {"--row-timeout", "120"}, 560);
  ASSERT_EQ(m.result.exit_code, 0) << m.result.output;
  ASSERT_TRUE(m.report.at("passed").get<bool>()) << m.report.dump(2);
  EXPECT_TRUE(m.report.at("reference").at("ok").get<bool>());
  // Every kind the matrix knows has a row, and each one was judged on its evidence.
  for (const auto& r : m.report.at("rows")) {
    EXPECT_EQ(r.at("verdict"), "PASS") << r.dump(2);
    EXPECT_TRUE(r.at("detected").get<bool>()) << r.dump(2);
    EXPECT_EQ(r.at("culprit_named"), r.at("culprit_expected")) << r.dump(2);
    EXPECT_EQ(r.at("leftover_processes"), 0) << r.dump(2);
    // null: the row's job writes no checkpoints (the pairwise probe).
    EXPECT_NE(r.at("checkpoints_intact"), false) << r.dump(2);
    if (r.at("recovery_applies").get<bool>()) EXPECT_TRUE(r.at("bit_identical").get<bool>()) << r.dump(2);
  }
  EXPECT_EQ(row(m, "kill").at("culprit_named"), "rank 3");
  EXPECT_EQ(row(m, "hang").at("expected_detector"), "watchdog+analyzer");
  EXPECT_EQ(row(m, "ckpt-corrupt").at("culprit_named"), "checkpoint step 10");
  EXPECT_EQ(row(m, "store-loss").at("culprit_named"), "rank 0");  // the rank that hosted the lost store
  EXPECT_NE(m.result.output.find("fault matrix: " + std::to_string(m.report.at("rows").size()) + " rows, 0 failed: PASS"),
            std::string::npos)
      << m.result.output;
  const std::string junit = read_file(m.dir + "/out/junit.xml");
  EXPECT_NE(junit.find("failures=\"0\""), std::string::npos) << junit;
  EXPECT_NE(read_file(m.dir + "/out/table.txt").find("kill "), std::string::npos);
}

// The self-test: the same faults with their detectors turned off must fail their rows.
TEST(FaultMatrix, ADisabledDetectorFailsItsRowAndTheMatrix) {
  Matrix m = run_matrix("self-test", {"--kinds", "nan,bitflip", "--without", "nan-check,replica-check", "--row-timeout", "120"},
                        400);
  EXPECT_EQ(m.result.exit_code, 1) << m.result.output;
  ASSERT_FALSE(m.report.is_null()) << m.result.output;
  EXPECT_FALSE(m.report.at("passed").get<bool>());
  for (const std::string kind : {"nan", "bitflip"}) {
    const auto& r = row(m, kind);
    EXPECT_EQ(r.at("verdict"), "FAIL") << r.dump(2);
    EXPECT_FALSE(r.at("detected").get<bool>()) << r.dump(2);
    EXPECT_NE(r.at("note").get<std::string>().find(" did not fire"), std::string::npos) << r.dump(2);
  }
  EXPECT_NE(m.result.output.find("fault matrix: 2 rows, 2 failed: FAIL"), std::string::npos) << m.result.output;
  EXPECT_NE(read_file(m.dir + "/out/junit.xml").find("failures=\"2\""), std::string::npos);
}

TEST(FaultMatrix, BadOptionsAreUsageErrors) {
  Matrix kind = run_matrix("bad-kind", {"--kinds", "explode"}, 60);
  EXPECT_EQ(kind.result.exit_code, 2) << kind.result.output;
  EXPECT_EQ(kind.result.output.rfind("ddx: error: --kinds: no matrix row for fault kind 'explode' (rows: kill, ", 0), 0u)
      << kind.result.output;
  Matrix off = run_matrix("bad-without", {"--without", "launcher"}, 60);
  EXPECT_EQ(off.result.exit_code, 2) << off.result.output;
  EXPECT_NE(off.result.output.find("--without: 'launcher' is not a detector that can be turned off"), std::string::npos)
      << off.result.output;
  Matrix rank = run_matrix("bad-rank", {"--fault-rank", "4"}, 60);
  EXPECT_EQ(rank.result.exit_code, 2) << rank.result.output;
  EXPECT_TRUE(kind.report.is_null() && off.report.is_null() && rank.report.is_null());  // nothing written
}

// --- recovery under every strategy: a kill at step 13, checkpoints every 5 steps ---

struct StrategyCase {
  std::string name;
  std::vector<std::string> args;
};

void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.name; }

class FaultMatrixRecovery : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(FaultMatrixRecovery, KillAtStep13ResumesBitIdentically) {
  const StrategyCase& c = GetParam();
  std::vector<std::string> args = {"--kinds", "kill", "--row-timeout", "150"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  Matrix m = run_matrix("recovery-" + c.name, args, 400);
  ASSERT_EQ(m.result.exit_code, 0) << m.result.output;
  const auto& r = row(m, "kill");
  EXPECT_TRUE(r.at("bit_identical").get<bool>()) << r.dump(2);
  EXPECT_NE(r.at("recovery").get<std::string>().find("resumed at step 10"), std::string::npos) << r.dump(2);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, FaultMatrixRecovery,
    ::testing::Values(StrategyCase{"single", {"--strategy", "single", "-np", "1"}},
                      StrategyCase{"fsdp", {"--strategy", "fsdp"}},
                      StrategyCase{"tp", {"--strategy", "tp", "-m", "debug-tp"}},
                      StrategyCase{"twod", {"--strategy", "2d", "-m", "debug-tp", "--", "--tp", "2"}},
                      StrategyCase{"pp", {"--strategy", "pp", "-m", "debug-pp", "--", "-b", "2", "--microbatches", "2"}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ddx::testing
