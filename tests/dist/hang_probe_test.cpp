// `ddx probe hang` end to end with real processes: every scenario with Gloo at 2 and 4 ranks and
// several culprits (rank 0 among them). The verdict must name the planted rank and op, arrive
// within the timeout plus 10 s of the job starting to hang, and leave no process behind. Also
// `ddx analyze` on the dumps such a run leaves, --check-collectives failing at once, and
// --backend nccl: run like Gloo where there is a GPU per rank, refused in one line elsewhere.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "gpus.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

constexpr int kTimeoutS = 2;  // --timeout of every run

std::string scratch(const std::string& tag) { return scratch_dir("hang", tag); }

struct ProbeRun {
  int exit_code = -1;
  double seconds = 0;
  std::string output;
  std::string trace_dir;
};

ProbeRun run_probe(const std::string& tag, std::vector<std::string> args, int limit_s = 80) {
  ProbeRun run;
  const std::string dir = scratch(tag);
  run.trace_dir = dir + "/trace";
  std::vector<std::string> argv{DDX_BIN, "probe", "hang", "--trace-dir", run.trace_dir};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto t0 = std::chrono::steady_clock::now();
  ChildProcess child(argv, {}, dir + "/output.txt");
  auto status = child.wait(std::chrono::seconds(limit_s));
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run.output = child.output();
  if (status && WIFEXITED(*status)) run.exit_code = WEXITSTATUS(*status);
  if (!status) run.output += "\n[test] TIMED OUT";
  return run;
}

// What the probe reports: "the job ended after X s" and "verdict Y s after the fault was
// planted" (from the culprit's note of when it misbehaved to the printed diagnosis).
double reported_seconds(const std::string& output, const std::string& marker) {
  const size_t at = output.find(marker);
  return at == std::string::npos ? 1e9 : std::atof(output.c_str() + at + marker.size());
}
double job_seconds(const std::string& output) { return reported_seconds(output, "the job ended after "); }
double verdict_seconds(const std::string& output) { return reported_seconds(output, "ddx probe hang: verdict "); }

struct Case {
  std::string scenario;
  int np;
  int culprit;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.scenario + "_np" + std::to_string(info.param.np) + "_culprit" +
                  std::to_string(info.param.culprit);
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

class HangScenario : public ::testing::TestWithParam<Case> {};

// Runs one scenario on `backend` and checks the verdict, its timing and the cleanup.
void expect_verdict(const Case& c, const std::string& backend) {
  ProbeRun run = run_probe(backend + "_" + case_name({c, 0}),
                           {"--scenario", c.scenario, "--culprit-rank", std::to_string(c.culprit), "-np",
                            std::to_string(c.np), "--timeout", std::to_string(kTimeoutS) + "s", "--quiet",
                            "--backend", backend});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  if (c.scenario == "healthy") {
    EXPECT_NE(run.output.find("no problem found"), std::string::npos) << run.output;
  } else {
    EXPECT_NE(run.output.find("PASS (" + c.scenario + "): the diagnosis names rank " + std::to_string(c.culprit)),
              std::string::npos)
        << run.output;
    const std::string verdict = "[culprit: rank " + std::to_string(c.culprit) + " ";
    const bool named = run.output.find(verdict) != std::string::npos ||
                       run.output.find("[culprit: rank " + std::to_string(c.culprit) + "]") != std::string::npos;
    EXPECT_TRUE(named) << run.output;
    // The verdict arrives within the timeout plus 10 s of the fault.
    EXPECT_LT(verdict_seconds(run.output), kTimeoutS + 10.0) << run.output;
  }
  EXPECT_TRUE(wait_until_dead(processes_left(run.trace_dir), std::chrono::seconds(5)))
      << "processes left behind";
  EXPECT_TRUE(processes_left(run.trace_dir).empty());
}

TEST_P(HangScenario, VerdictNamesThePlantedCulpritInTimeAndNothingIsLeftBehind) { expect_verdict(GetParam(), "gloo"); }

// 2 ranks: both culprits; 4 ranks: rank 0 for half the scenarios, a middle or last rank for
// the others. Two runs of 2 ranks and one of 4 per scenario keep CI time reasonable.
INSTANTIATE_TEST_SUITE_P(
    Gloo, HangScenario,
    ::testing::Values(Case{"healthy", 2, 0}, Case{"healthy", 4, 0},
                      Case{"missing-collective", 2, 0}, Case{"missing-collective", 2, 1},
                      Case{"missing-collective", 4, 2},
                      Case{"mismatched-op", 2, 0}, Case{"mismatched-op", 2, 1}, Case{"mismatched-op", 4, 0},
                      Case{"mismatched-size", 2, 0}, Case{"mismatched-size", 2, 1},
                      Case{"mismatched-size", 4, 3},
                      Case{"straggler", 2, 0}, Case{"straggler", 2, 1}, Case{"straggler", 4, 0},
                      Case{"dead-rank", 2, 0}, Case{"dead-rank", 2, 1}, Case{"dead-rank", 4, 2},
                      Case{"p2p-deadlock", 2, 0}, Case{"p2p-deadlock", 2, 1}, Case{"p2p-deadlock", 4, 3}),
    case_name);

TEST(HangProbe, CheckCollectivesFailsAMismatchAtOnceWithBothSides) {
  // A 20 s timeout: the mismatch must be reported long before it.
  ProbeRun run = run_probe("check", {"--scenario", "mismatched-op", "--culprit-rank", "1", "-np", "2",
                                     "--timeout", "20s", "--check-collectives"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_LT(verdict_seconds(run.output), 10.0) << run.output;
  EXPECT_NE(run.output.find("collective mismatch at world #3"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("all_gather float32 [1024]"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("all_reduce(sum) float32 [1024]"), std::string::npos) << run.output;
}

TEST(HangProbe, AnalyzeReadsTheDumpsAsTextAndJson) {
  ProbeRun run = run_probe("analyze", {"--scenario", "straggler", "--culprit-rank", "1", "-np", "2",
                                       "--timeout", "2s", "--quiet"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string dir = scratch("analyze-cli");
  {
    ChildProcess child({DDX_BIN, "analyze", run.trace_dir, "--json"}, {}, dir + "/json.txt");
    auto status = child.wait(std::chrono::seconds(30));
    ASSERT_TRUE(status && WIFEXITED(*status));
    EXPECT_EQ(WEXITSTATUS(*status), 1);  // a problem was found
    auto doc = nlohmann::json::parse(child.output());
    EXPECT_EQ(doc["verdict"]["culprits"], nlohmann::json::array({1}));
    EXPECT_EQ(doc["verdict"]["op"], "all_reduce");
  }
  {
    ChildProcess child({DDX_BIN, "analyze", dir + "/nothing-here"}, {}, dir + "/bad.txt");
    auto status = child.wait(std::chrono::seconds(30));
    ASSERT_TRUE(status && WIFEXITED(*status));
    EXPECT_EQ(WEXITSTATUS(*status), 2);
    EXPECT_NE(child.output().find("ddx: error: " + dir + "/nothing-here: no such file or directory"), std::string::npos)
        << child.output();
  }
}

TEST(HangProbe, BadFlagsAreOneLineAndExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--scenario", "nope"}, {"--culprit-rank", "5", "-np", "2"}, {"--timeout", "soon"},
           {"--scenario", "p2p-deadlock", "-np", "3"}}) {
    const std::string dir = scratch("badflags");
    std::vector<std::string> argv{DDX_BIN, "probe", "hang"};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess child(argv, {}, dir + "/out.txt");
    auto status = child.wait(std::chrono::seconds(30));
    ASSERT_TRUE(status && WIFEXITED(*status));
    EXPECT_EQ(WEXITSTATUS(*status), 2) << child.output();
    EXPECT_EQ(child.output().rfind("ddx: error: ", 0), 0u) << child.output();
  }
}

// --backend nccl needs a GPU per rank: with them the probe names the culprit as on Gloo; with
// fewer (a CPU-only host, or a ddx built without CUDA) it is refused at once, saying how many
// this host has.
TEST(HangProbe, NcclBackendRunsWithAGpuPerRankAndIsRefusedWithFewer) {
  const int gpus = gpus_for_ddx();
  if (gpus >= 2) {
    expect_verdict({"healthy", 2, 0}, "nccl");
    expect_verdict({"missing-collective", 2, 1}, "nccl");
    return;
  }
  ProbeRun run = run_probe("nccl-refused", {"--backend", "nccl", "-np", "2"}, 30);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_EQ(run.output.rfind("ddx: error: --backend nccl needs one CUDA device per rank: -np 2, but this host has " +
                                 std::to_string(gpus) + "\n",
                             0),
            0u)
      << run.output;
}

}  // namespace
}  // namespace ddx::testing
