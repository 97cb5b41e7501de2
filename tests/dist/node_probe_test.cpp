// `ddx probe compute` and `ddx probe memory` on real ranks under ddx launch: clean runs pass and
// name nobody, twenty times in a row; a rank made genuinely slow (a CPU quota on its cgroup,
// cpu_quota.h) is named, with its host and local rank, by compute, memory and the pairwise
// bandwidth matrix. SERIAL: they judge rates between ranks, which other tests would skew.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cpu_quota.h"
#include "launch_verdict.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::vector<std::string> launch(int np, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {DDX_BIN, "launch", "-np", std::to_string(np), "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

TEST(NodeProbes, ComputeAndMemoryPassAtTwoRanksAndWriteEveryTrial) {
  const std::string dir = scratch_dir("node-probes", "pass");
  RunResult compute = run_in(
      dir, launch(2, {DDX_BIN, "probe", "compute", "--sizes", "128,256", "--json", dir + "/compute.json"}), {}, 120);
  ASSERT_EQ(compute.exit_code, 0) << compute.output;
  EXPECT_TRUE(has(compute.output, "compute: 2 ranks x 2 metrics, 7 trials: no slow rank or host")) << compute.output;
  const auto j = nlohmann::json::parse(read_file(dir + "/compute.json"));
  EXPECT_TRUE(j["passed"].get<bool>());
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (const auto& r : j["ranks"]) {
    EXPECT_EQ(r["host"], this_host());
    const auto& m = r["metrics"]["fp32_n256"];
    EXPECT_EQ(m["trials"].size(), 7u) << r.dump();
    EXPECT_GE(m["best"].get<double>(), m["median"].get<double>()) << r.dump();
    EXPECT_GT(m["median"].get<double>(), 0) << r.dump();
  }
  EXPECT_EQ(j["per_host"].size(), 1u);

  RunResult memory = run_in(
      dir, launch(2, {DDX_BIN, "probe", "memory", "--array-bytes", "16M", "--json", dir + "/memory.json"}), {}, 120);
  ASSERT_EQ(memory.exit_code, 0) << memory.output;
  EXPECT_TRUE(has(memory.output, "memory: 2 ranks x 2 metrics, 7 trials: no slow rank or host")) << memory.output;
  const auto m = nlohmann::json::parse(read_file(dir + "/memory.json"));
  EXPECT_GT(m["ranks"][1]["metrics"]["host_triad"]["best"].get<double>(), 0.1) << "GB/s";
}

TEST(NodeProbes, BadFlagsAreOneLineErrors) {
  const std::string dir = scratch_dir("node-probes", "flags");
  RunResult few = run_in(dir, {DDX_BIN, "probe", "compute", "--trials", "2"}, {}, 30);
  EXPECT_EQ(few.exit_code, 2) << few.output;
  EXPECT_TRUE(has(few.output, "--trials")) << few.output;
  RunResult bytes = run_in(dir, {DDX_BIN, "probe", "memory", "--array-bytes", "12Q"}, {}, 30);
  EXPECT_NE(bytes.exit_code, 0) << bytes.output;
  EXPECT_TRUE(has(bytes.output, "--array-bytes")) << bytes.output;
  RunResult tf32 = run_in(dir, {DDX_BIN, "probe", "compute", "--device", "cpu", "--dtypes", "tf32"}, {}, 60);
  EXPECT_EQ(tf32.exit_code, 2) << tf32.output;
  EXPECT_TRUE(has(tf32.output, "ddx: error: --dtypes tf32: TF32 is a GPU tensor-core mode")) << tf32.output;
}

// No false alarms: on this machine, twenty runs in a row of each probe name nobody: compute and
// memory at 2 ranks on its 2 cores, the pairwise link matrix at 4 ranks (two pairs at once on 2
// cores) with 8 MiB per exchange (at validate's 1 MiB one run in 20-40 still names a healthy
// link on this VM: docs/thresholds.md).
TEST(NodeProbes, TwentyCleanRunsInARowNameNobody) {
  const std::string dir = scratch_dir("node-probes", "clean");
  const std::vector<std::pair<int, std::vector<std::string>>> probes = {
      {2, {DDX_BIN, "probe", "compute", "--sizes", "256", "--trials", "5", "--min-trial-time", "0.03"}},
      {2, {DDX_BIN, "probe", "memory", "--array-bytes", "16M", "--trials", "5", "--min-trial-time", "0.03"}},
      {4, {DDX_BIN, "probe", "bandwidth", "--pairs", "-e", "8M", "-n", "5", "-w", "2"}}};
  for (const auto& [np, probe] : probes) {
    int named = 0;
    std::string outputs;
    for (int run = 0; run < 20; ++run) {
      RunResult r = run_in(dir, launch(np, probe), {}, 120);
      ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;
      if (r.exit_code != 0) {
        ++named;
        outputs += r.output;
      }
    }
    EXPECT_EQ(named, 0) << probe[2] << " " << probe[3] << ":\n" << outputs;
  }
}

// Rank 1 gets a fifth of one core (the scheduler throttles it): compute and memory name it.
TEST(NodeProbes, ARankUnderACpuQuotaIsNamedByComputeAndMemory) {
  CpuQuota quota(0.2);
  DDX_SKIP_IF_REFUSED(quota.refused());
  const std::string dir = scratch_dir("node-probes", "quota");
  for (const std::string probe : {"compute", "memory"}) {
    std::vector<std::string> command = {DDX_BIN, "probe", probe, "--json", dir + "/" + probe + ".json"};
    if (probe == "compute") command.insert(command.end(), {"--sizes", "256,512"});
    if (probe == "memory") command.insert(command.end(), {"--array-bytes", "16M"});
    RunResult r = run_in(dir, launch(2, quota.wrap_rank(1, command)), {}, 180);
    ASSERT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(has(r.output, "SLOW rank 1 (host " + this_host() + ", local rank 1): ")) << r.output;
    // Named in the first pass, so measured again (14 trials) and named again.
    EXPECT_TRUE(has(r.output, "# measured again, 7 trials more, after a first pass named someone: ")) << r.output;
    EXPECT_TRUE(has(r.output, probe + ": 2 ranks x 2 metrics, 14 trials: SLOW: rank 1 (" + this_host() + ", local rank 1): "))
        << r.output;
    EXPECT_FALSE(has(r.output, "SLOW rank 0")) << r.output;
    // A verdict, not a crash: both ranks end with it, and the launcher names no root cause
    // (it used to blame the healthy rank 0, the first to exit, and stop rank 1).
    expect_launch_reported_verdict(r.output, 2, 1,
                                   probe + ": 2 ranks x 2 metrics, 14 trials: SLOW: rank 1 (" + this_host() + ", local rank 1): ");
    const auto j = nlohmann::json::parse(read_file(dir + "/" + probe + ".json"));
    EXPECT_FALSE(j["passed"].get<bool>());
    // Named on each of its 2 metrics (the loop below must have something to check).
    ASSERT_EQ(j["slow_ranks"].size(), 2u) << j.dump();
    for (const auto& f : j["slow_ranks"]) {
      EXPECT_EQ(f["rank"], 1) << f.dump();
      EXPECT_LT(f["value"].get<double>(), f["threshold"].get<double>()) << f.dump();
    }
  }
}

// The same throttled rank, among three, is the slow rank of the pairwise link matrix: every
// link it is on falls below the others.
TEST(NodeProbes, ARankUnderACpuQuotaIsNamedByThePairwiseBandwidth) {
  CpuQuota quota(0.1);
  DDX_SKIP_IF_REFUSED(quota.refused());
  const std::string dir = scratch_dir("node-probes", "pairs");
  RunResult r = run_in(dir,
                       launch(3, quota.wrap_rank(2, {DDX_BIN, "probe", "bandwidth", "--pairs", "-e", "16M", "-n", "5",
                                                     "-w", "2", "--json", dir + "/pairs.json"})),
                       {}, 180);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  expect_launch_reported_verdict(r.output, 3, 1, "ddx probe bandwidth --pairs: FAILED (3 links, ");
  EXPECT_TRUE(has(r.output, " 1 slow ranks: rank 2)\n  rank  local")) << r.output;  // the verdict names it
  const auto j = nlohmann::json::parse(read_file(dir + "/pairs.json"));
  const auto& slow = j["ddx"]["slow_ranks"];
  ASSERT_EQ(slow.size(), 1u) << j["ddx"].dump();
  EXPECT_EQ(slow[0]["rank"], 2) << slow.dump();
}

}  // namespace
}  // namespace ddx::testing
