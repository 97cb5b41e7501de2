// `ddx analyze` on the flight-recorder dumps of real PyTorch jobs: 4 Gloo ranks under torchrun
// (tests/python/fr_job.py), PyTorch's recorder on (TORCH_FR_BUFFER_SIZE), one planted fault per
// job. The verdict must name the planted rank and the kind of fault. PyTorch's own reader,
// torchfrtrace, runs on the same files: where it does not crash, it must not contradict ddx
// (on Gloo dumps it crashes, the gap ddx fills: docs/analyze-pytorch.md).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

const std::string kBin = std::filesystem::path(DDX_PYTHON).parent_path().string();

struct Job {
  std::string dir;
  std::string traces;
  RunResult torchrun;
};

// One torchrun job of fr_job.py with `fault` planted on rank 2. torchrun's monitor looks at its
// workers every 10 s, so the surviving ranks write their dumps before it tears the job down
// after a rank dies (as NCCL's watchdog dumps before the job is killed).
Job run_job(const std::string& fault, const std::string& format = "pickle") {
  Job job;
  job.dir = scratch_dir("pytorch-fr", fault + "-" + format);
  job.traces = job.dir + "/traces";
  std::filesystem::create_directories(job.traces);
  job.torchrun = run_in(job.dir,
                        {kBin + "/torchrun", "--nproc-per-node", "4", "--monitor-interval", "10",
                         std::string(DDX_SOURCE_DIR) + "/tests/python/fr_job.py"},
                        {{"TORCH_FR_BUFFER_SIZE", "2000"},
                         {"TORCH_FR_DUMP_TEMP_FILE", job.traces + "/nccl_trace_rank_"},
                         {"FR_FAULT", fault},
                         {"FR_CULPRIT", "2"},
                         {"FR_FORMAT", format},
                         {"OMP_NUM_THREADS", "1"}},
                        150);
  EXPECT_TRUE(processes_left(job.dir).empty()) << "processes left by the " << fault << " job";
  return job;
}

struct Analysis {
  int exit_code = -1;
  nlohmann::json report;
  std::string text;
};

Analysis analyze(const Job& job) {
  Analysis a;
  RunResult json = run_in(job.dir, {DDX_BIN, "analyze", "--json", job.traces}, {}, 60);
  a.exit_code = json.exit_code;
  const size_t start = json.output.find('{');
  a.report = nlohmann::json::parse(start == std::string::npos ? "null" : json.output.substr(start), nullptr, false);
  a.text = run_in(job.dir, {DDX_BIN, "analyze", job.traces}, {}, 60).output;
  return a;
}

// torchfrtrace on the same dumps: nullopt when it crashed (a Python traceback), else its output.
std::optional<std::string> torchfrtrace(const Job& job) {
  RunResult r = run_in(job.dir,
                       {kBin + "/torchfrtrace", "--allow-incomplete-ranks", "-p", "nccl_trace_rank_", job.traces},
                       {}, 120);
  if (r.exit_code != 0 || r.output.find("Traceback (most recent call last)") != std::string::npos) return std::nullopt;
  return r.output;
}

struct Case {
  std::string fault;
  std::string kind;            // verdict.kind
  std::vector<int> culprits;
  std::string summary_has;     // a phrase of the verdict's summary
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.fault; }

class PytorchJob : public ::testing::TestWithParam<Case> {};

TEST_P(PytorchJob, TheVerdictNamesThePlantedRankAndKind) {
  ASSERT_EQ(::access((kBin + "/torchrun").c_str(), X_OK), 0) << "no torchrun beside " << DDX_PYTHON;
  const Case& c = GetParam();
  Job job = run_job(c.fault);
  Analysis a = analyze(job);
  ASSERT_EQ(a.exit_code, 1) << a.text << "\n--- the job:\n" << job.torchrun.output;
  ASSERT_TRUE(a.report.is_object()) << a.text;
  const auto& verdict = a.report.at("verdict");
  EXPECT_EQ(verdict.at("kind"), c.kind) << a.text;
  EXPECT_EQ(verdict.at("culprits"), nlohmann::json(c.culprits)) << a.text;
  EXPECT_NE(verdict.at("summary").get<std::string>().find(c.summary_has), std::string::npos) << a.text;
  // Where PyTorch recorded the culprit's stack, the report shows it (a killed rank left none).
  if (c.fault != "kill") {
    EXPECT_FALSE(verdict.at("culprit_stack").empty()) << a.text;
    EXPECT_NE(a.text.find("rank 2's stack at "), std::string::npos) << a.text;
    EXPECT_NE(a.text.find("fr_job.py:"), std::string::npos) << a.text;
  }
  if (auto theirs = torchfrtrace(job)) {
    // It ran: it must not put the blame elsewhere.
    EXPECT_EQ(theirs->find("Culprit rank 0"), std::string::npos) << *theirs;
    EXPECT_EQ(theirs->find("Culprit rank 1"), std::string::npos) << *theirs;
    EXPECT_EQ(theirs->find("Culprit rank 3"), std::string::npos) << *theirs;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, PytorchJob,
    ::testing::Values(Case{"skip", "skipped-collective", {2}, "rank 2 skipped all_reduce at 'fr_job.py:"},
                      Case{"op", "op-mismatch", {2}, "rank 2 called broadcast as #3"},
                      Case{"size", "size-mismatch", {2}, "all_reduce float32 [9]"},
                      Case{"dtype", "dtype-mismatch", {2}, "all_reduce float64 [8]"},
                      Case{"compute", "never-joined", {2}, "rank 2 never joined all_reduce #3"},
                      Case{"kill", "no-dump", {2}, "it crashed or was killed before it could write one, the prime suspect"},
                      // Rank 2 leaves out its pair's all_reduce (group [2,3]) and goes on to the
                      // world's; rank 3 waits in the pair: the world group's view alone would
                      // blame rank 3.
                      Case{"subgroup", "never-joined", {2}, "rank 2 never joined all_reduce #3 on group 2"}),
    [](const auto& info) { return info.param.fault; });

TEST(PytorchJobs, AHealthyJobIsNoProblemAndJsonDumpsReadLikePickles) {
  ASSERT_EQ(::access((kBin + "/torchrun").c_str(), X_OK), 0) << "no torchrun beside " << DDX_PYTHON;
  Job healthy = run_job("none");
  Analysis a = analyze(healthy);
  EXPECT_EQ(a.exit_code, 0) << a.text << "\n--- the job:\n" << healthy.torchrun.output;
  EXPECT_NE(a.text.find("no problem found"), std::string::npos) << a.text;
  EXPECT_EQ(a.report.at("dumps").at("usable").size(), 4u) << a.text;
  // PyTorch's JSON dump of the same skip: the same culprit. The JSON dump has no stacks, so no
  // call sites to count the skipped all_reduce by: the rank is named by the op it went on to.
  Job json = run_job("skip", "json");
  Analysis j = analyze(json);
  ASSERT_EQ(j.exit_code, 1) << j.text << "\n--- the job:\n" << json.torchrun.output;
  EXPECT_EQ(j.report.at("verdict").at("kind"), "op-mismatch") << j.text;
  EXPECT_EQ(j.report.at("verdict").at("culprits"), nlohmann::json::array({2})) << j.text;
  EXPECT_NE(j.report.at("verdict").at("summary").get<std::string>().find("rank 2 called barrier as #5"), std::string::npos)
      << j.text;
}

}  // namespace
}  // namespace ddx::testing
