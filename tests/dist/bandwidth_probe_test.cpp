// `ddx probe bandwidth` with real processes over loopback: the gloo engine under ddx launch and
// the mpi engine under mpiexec at 2 and 4 ranks with #wrong = 0 on every collective; a
// deliberately corrupted result counted as wrong (both engines); pairwise mode naming a rank
// slowed on purpose (both engines); a hung rank ending the probe within -T; sizes reduced to
// fit memory; bad flags; the nccl engine on a GPU (#wrong = 0 at world size 1), or its
// one-line error without one. Timings are never asserted, only that each job finishes within
// its hard timeout.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gpus.h"
#include "launch_verdict.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

std::string scratch(const std::string& tag) { return scratch_dir("bandwidth", tag); }

RunResult run_cmd(const std::string& dir, std::vector<std::string> argv, std::map<std::string, std::string> env = {},
                  int timeout_s = 120) {
  return run_in(dir, std::move(argv), std::move(env), timeout_s);
}

std::vector<std::string> under_launch(int ranks, std::vector<std::string> args) {
  std::vector<std::string> argv{DDX_BIN, "launch", "--nproc-per-node", std::to_string(ranks), "--", DDX_BIN, "probe",
                                "bandwidth"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> under_mpiexec(int ranks, std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/mpiexec.hydra", "-n", std::to_string(ranks), DDX_BIN, "probe", "bandwidth"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Every collective, small sizes, few iterations: the point is #wrong, not speed.
std::vector<std::string> all_ops(const std::string& engine, const std::string& json, std::vector<std::string> more = {}) {
  std::vector<std::string> args{"--engine", engine, "--op-list", "all", "-b", "1K", "-e", "256K", "-f", "16",
                                "-n", "3", "-w", "1", "-c", "2", "--check-timed", "-T", "60", "--json", json};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Every (collective, size, placement) result measured and checked with no wrong element.
void expect_all_correct(const std::string& json_path, int ranks, const std::string& engine) {
  auto j = nlohmann::json::parse(read_file(json_path));
  EXPECT_EQ(j["ddx"]["engine"], engine);
  EXPECT_EQ(j["ddx"]["nranks"], ranks);
  EXPECT_EQ(j["devices"].size(), static_cast<size_t>(ranks));
  EXPECT_EQ(j["out_of_bounds"]["count"], 0);
  EXPECT_EQ(j["injected_faults"], nlohmann::json::array());  // a clean run says so too
  std::set<std::string> collectives;
  for (const auto& r : j["results"]) {
    collectives.insert(r["ddx"]["collective"].get<std::string>());
    EXPECT_EQ(r["out_of_place"]["nwrong"].get<double>(), 0) << r.dump();
    EXPECT_GT(r["out_of_place"]["bus_bw"].get<double>() + (ranks == 1), 0) << r.dump();
    EXPECT_EQ(r["ddx"]["out_of_place"]["rank_time_us"].size(), static_cast<size_t>(ranks));
    if (!r["in_place"].is_null()) EXPECT_EQ(r["in_place"]["nwrong"].get<double>(), 0) << r.dump();
  }
  EXPECT_EQ(collectives, (std::set<std::string>{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                                "alltoall", "sendrecv"}));
}

TEST(BandwidthProbe, GlooEveryCollectiveCorrectAt2And4Ranks) {
  for (int ranks : {2, 4}) {
    const std::string dir = scratch("gloo" + std::to_string(ranks));
    RunResult r = run_cmd(dir, under_launch(ranks, all_ops("gloo", dir + "/bw.json", {"-r", "-1", "-d", "float,int32",
                                                                                      "--csv", dir + "/bw.csv",
                                                                                      "--plot", dir + "/bw.svg"})));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("# Collective test starting: all_reduce_perf"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("# Avg bus bandwidth    : "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("#  Rank  " + std::to_string(ranks - 1) + " Group  0 Pid"), std::string::npos) << r.output;
    expect_all_correct(dir + "/bw.json", ranks, "gloo");
    EXPECT_NE(read_file(dir + "/bw.csv").find("reduce_scatter,"), std::string::npos);
    EXPECT_NE(read_file(dir + "/bw.svg").find("<svg"), std::string::npos);
    // -r -1: every root of the rooted ops.
    auto j = nlohmann::json::parse(read_file(dir + "/bw.json"));
    std::set<std::string> roots;
    for (const auto& row : j["results"]) {
      if (row["ddx"]["collective"] == "broadcast") roots.insert(row["root"].get<std::string>());
    }
    EXPECT_EQ(roots.size(), static_cast<size_t>(ranks));
  }
}

TEST(BandwidthProbe, MpiEveryCollectiveCorrectAt2And4Ranks) {
  for (int ranks : {2, 4}) {
    const std::string dir = scratch("mpi" + std::to_string(ranks));
    RunResult r = run_cmd(dir, under_mpiexec(ranks, all_ops("mpi", dir + "/bw.json", {"-d", "float,int64,uint32"})));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
    expect_all_correct(dir + "/bw.json", ranks, "mpi");
  }
}

TEST(BandwidthProbe, CorruptedResultIsCountedWrongOnGloo) {
  const std::string dir = scratch("corrupt-gloo");
  RunResult r = run_cmd(dir, under_launch(2, {"--engine", "gloo", "-b", "4K", "-e", "4K", "-n", "2", "-c", "1",
                                              "--json", dir + "/bw.json"}),
                        {{"DDX_FAULT", "corrupt-collective@rank=1,op=all_reduce"}});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("# Out of bounds values : 2 FAILED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# First wrong value: all_reduce float sum 4096 B out-of-place, rank 1 element 0"),
            std::string::npos)
      << r.output;
  auto j = nlohmann::json::parse(read_file(dir + "/bw.json"));
  EXPECT_EQ(j["results"][0]["out_of_place"]["nwrong"].get<double>(), 1);
  EXPECT_EQ(j["out_of_bounds"]["okay"], false);
  // The report says the result was faulted on purpose (a clean report has an empty list).
  EXPECT_EQ(j["injected_faults"], nlohmann::json::array({"DDX_FAULT corrupt-collective@rank=1,op=all_reduce"}));
}

TEST(BandwidthProbe, CorruptedResultIsCountedWrongOnMpi) {
  const std::string dir = scratch("corrupt-mpi");
  RunResult r = run_cmd(dir, under_mpiexec(2, {"--engine", "mpi", "--op-list", "all_gather", "-b", "4K", "-e", "4K",
                                               "-n", "2", "-c", "1"}),
                        {{"DDX_FAULT", "corrupt-collective@rank=0,op=all_gather"}});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAILED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0 element 0"), std::string::npos) << r.output;
}

void expect_rank2_named_slow(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("# Slow ranks (their median link below"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("#   rank 2 (host "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("#   rank 0 (host "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("<-> 2 "), std::string::npos) << r.output;
}

TEST(BandwidthProbe, PairwiseFindsADelayedRankOnGloo) {
  const std::string dir = scratch("pairs-gloo");
  RunResult r = run_cmd(dir, under_launch(4, {"--engine", "gloo", "--pairs", "-e", "64K", "-n", "4", "-w", "1",
                                              "--json", dir + "/pairs.json"}),
                        {{"DDX_FAULT", "slow-link@rank=2,op=send,ms=40"}});
  expect_rank2_named_slow(r);
  auto j = nlohmann::json::parse(read_file(dir + "/pairs.json"));
  ASSERT_EQ(j["ddx"]["slow_ranks"].size(), 1u);
  EXPECT_EQ(j["ddx"]["slow_ranks"][0]["rank"], 2);
  EXPECT_EQ(j["ddx"]["pairs"].size(), 6u);
  EXPECT_EQ(j["ddx"]["nwrong"], 0);
}

// --json FILE is that file, replaced by each run (ddx validate reads it back: a run that wrote
// FILE.0 beside an earlier FILE had its verdict taken from the earlier one). A path rank 0 cannot
// write stops the probe before any measurement, in one line.
TEST(BandwidthProbe, JsonIsTheFileNamedReplacedByEachRun) {
  const std::string dir = scratch("json-replaced");
  for (const char* size : {"4K", "8K"}) {
    RunResult sweep = run_cmd(dir, under_launch(2, {"--engine", "gloo", "-b", "1K", "-e", size, "-f", "2", "-n", "2", "-w",
                                                   "1", "--json", dir + "/bw.json"}));
    ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
    RunResult pairs = run_cmd(dir, under_launch(2, {"--engine", "gloo", "--pairs", "-e", size, "-n", "2", "-w", "1",
                                                   "--json", dir + "/pairs.json"}));
    ASSERT_EQ(pairs.exit_code, 0) << pairs.output;
  }
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/bw.json"))["config"]["maximum_bytes"], 8192);
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/pairs.json"))["ddx"]["bytes"], 8192);
  EXPECT_FALSE(std::filesystem::exists(dir + "/bw.json.0"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/pairs.json.0"));

  RunResult bad = run_cmd(dir, under_launch(2, {"--engine", "gloo", "-b", "1K", "-e", "4K", "--json", "/proc/nope/bw.json"}));
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("ddx: error: --json /proc/nope/bw.json cannot be written: "), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("Writing JSON output"), std::string::npos) << bad.output;  // stopped before the sweep
}

TEST(BandwidthProbe, PairwiseFindsADelayedRankOnMpi) {
  const std::string dir = scratch("pairs-mpi");
  RunResult r = run_cmd(dir, under_mpiexec(4, {"--engine", "mpi", "--pairs", "-e", "64K", "-n", "4", "-w", "1"}),
                        {{"DDX_FAULT", "slow-link@rank=2,op=send,ms=40"}});
  expect_rank2_named_slow(r);
}

TEST(BandwidthProbe, PairwiseHealthyJobPasses) {
  const std::string dir = scratch("pairs-ok");
  RunResult r = run_cmd(dir, under_launch(3, {"--engine", "gloo", "--pairs", "-e", "16K", "-n", "3", "--pair-fraction", "0"}));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 rounds of disjoint pairs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# Slow links: none"), std::string::npos) << r.output;
}

TEST(BandwidthProbe, HungRankEndsTheProbeWithinTimeout) {
  const std::string dir = scratch("hang");
  // Rank 1 sleeps a minute before its all_reduce; -T 5 must end the job long before that.
  RunResult r = run_cmd(dir, under_launch(2, {"--engine", "gloo", "-b", "4K", "-e", "4K", "-n", "2", "-T", "5"}),
                        {{"DDX_FAULT", "slow-link@rank=1,op=all_reduce,ms=60000"}}, 45);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("TIMED OUT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("made no progress for 5 s (-T/--timeout)"), std::string::npos) << r.output;
}

TEST(BandwidthProbe, SizesBeyondMemoryAreReducedNotFatal) {
  const std::string dir = scratch("memory");
  RunResult r = run_cmd(dir, under_launch(2, {"--engine", "gloo", "-b", "1M", "-e", "1T", "-n", "1", "-c", "1"}),
                        {{"DDX_FAULT", "host-memory@bytes=4000000"}});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# Reducing maxBytes to 533312 due to memory limitation"), std::string::npos) << r.output;
  // A malformed test limit is refused, not read as "unknown memory, no limit".
  RunResult bad = run_cmd(dir, {DDX_BIN, "probe", "bandwidth", "--engine", "gloo", "-b", "1K", "-e", "1T", "-n", "1"},
                          {{"DDX_FAULT", "host-memory@bytes=4e6"}}, 60);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("ddx: error: DDX_FAULT 'host-memory@bytes=4e6' bytes='4e6' is not an integer"),
            std::string::npos)
      << bad.output;
}

TEST(BandwidthProbe, BadFlagsFailWithOneLineAndExit2) {
  const std::string dir = scratch("flags");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{{{"-b", "1X"}, "-b/--minbytes '1X'"},
                                         {{"--op-list", "allreduce,gossip"}, "--op-list 'gossip'"},
                                         {{"-d", "int32", "-o", "avg"}, "-o/--op avg needs a floating-point"},
                                         {{"-b", "2M", "-e", "1M"}, "-e/--maxbytes (1048576) is below"},
                                         {{"-z", "7"}, "--blocking"},
                                         {{"--engine", "gloo", "-d", "uint64"}, "--engine gloo has no -d uint64"},
                                         {{"--engine", "mpi", "-d", "half"}, "--engine mpi cannot reduce -d half"}}) {
    std::vector<std::string> argv{DDX_BIN, "probe", "bandwidth"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    RunResult r = run_cmd(dir, argv, {}, 60);
    EXPECT_EQ(r.exit_code, 2) << c.says << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("ddx: error:"), r.output.rfind("ddx: error:")) << "one error line\n" << r.output;
  }
}

// A probe that misses its own --min-busbw says which collective and size in every rank's error
// report, so the launcher's root-cause line shows it instead of "no error file".
// A missed --min-busbw is the probe's verdict, not a crash: every rank ends with it (exit 1) and
// the launcher shows it, naming the collective and the size at fault, with no root cause.
TEST(BandwidthProbe, MissedMinBusbwIsTheLaunchersVerdict) {
  const std::string dir = scratch("min-busbw");
  RunResult r = run_cmd(dir, under_launch(2, {"--engine", "gloo", "-b", "4K", "-e", "4K", "-n", "2", "--min-busbw",
                                              "1000000"}));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  expect_launch_reported_verdict(r.output, 2, 1, "ddx probe bandwidth: all_reduce: average busbw ");
  const std::regex verdict(R"(\nddx launch: the job reported a verdict \(exit 1, attempt 1 of 1\): )"
                           R"(ddx probe bandwidth: all_reduce: average busbw [0-9.e+-]+ GB/s is below )"
                           R"(--min-busbw 1e\+06 GB/s \(lowest [0-9.e+-]+ GB/s at 4096 B float sum (out-of-place|in-place)\)\n)");
  EXPECT_TRUE(std::regex_search(r.output, verdict)) << r.output;
}

// With a GPU the nccl engine runs every collective at world size 1 with no wrong element;
// without one (or in a ddx built without CUDA) it says why in one line.
TEST(BandwidthProbe, NcclEngineRunsOnAGpuAndSaysWhyNotWithout) {
  const std::string dir = scratch("nccl");
  if (gpus_for_ddx() >= 1) {
    std::vector<std::string> argv{DDX_BIN, "probe", "bandwidth"};
    for (const auto& arg : all_ops("nccl", dir + "/bw.json")) argv.push_back(arg);
    RunResult r = run_cmd(dir, argv);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
    expect_all_correct(dir + "/bw.json", 1, "nccl");
    return;
  }
  RunResult r = run_cmd(dir, {DDX_BIN, "probe", "bandwidth", "--engine", "nccl", "-b", "1K", "-e", "1K"}, {}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::string why = DDX_BUILT_WITH_CUDA ? "ddx: error: --engine nccl: no GPU is visible to rank 0"
                                              : "ddx: error: --engine nccl: this ddx was built without the CUDA toolkit";
  EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ddx: error:"), r.output.rfind("ddx: error:")) << "one error line\n" << r.output;
}

TEST(BandwidthProbe, SingleRankRunsWithoutALauncher) {
  const std::string dir = scratch("single");
  RunResult r = run_cmd(dir, {DDX_BIN, "probe", "bandwidth", "--engine", "gloo", "--op-list", "all", "-b", "1K", "-e",
                              "8K", "-f", "2", "-n", "2"},
                        {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# ddx probe bandwidth: OK"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddx::testing
