// The collective layer and process groups with real processes over loopback: the selfcheck
// (every op, several dtypes and odd sizes, exact results) at 2 and 4 ranks, proof that it
// fails on a corrupted result, meshes and subgroups, op records, timeouts, shutdown, mpiexec.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "launch_verdict.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

std::string scratch(const std::string& tag) { return scratch_dir("collectives", tag); }

RunResult run_cmd(const std::string& tag, std::vector<std::string> argv,
                  std::map<std::string, std::string> env = {}, int timeout_s = 120) {
  return run_in(scratch(tag), std::move(argv), std::move(env), timeout_s);
}

std::vector<std::string> launch(int ranks, std::vector<std::string> command) {
  std::vector<std::string> argv{DDX_BIN, "launch", "--nproc-per-node", std::to_string(ranks), "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

void expect_selfcheck_passes(int ranks) {
  const std::string dir = scratch("selfcheck" + std::to_string(ranks));
  const std::string json_path = dir + "/selfcheck.json";
  RunResult r = run_cmd("sc" + std::to_string(ranks),
              launch(ranks, {DDX_BIN, "probe", "selfcheck", "--sizes", "1,7,1000,65537",
                             "--dtypes", "float32,float64,bfloat16,int32,int64", "--json", json_path}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all PASS"), std::string::npos) << r.output;
  auto report = nlohmann::json::parse(read_file(json_path));
  EXPECT_TRUE(report["passed"].get<bool>());
  EXPECT_EQ(report["world_size"].get<int>(), ranks);
  ASSERT_EQ(report["ranks"].size(), static_cast<size_t>(ranks));
  std::set<std::string> ops, dtypes;
  std::set<int64_t> sizes;
  for (const auto& rank : report["ranks"]) {
    for (const auto& c : rank["checks"]) {
      EXPECT_EQ(c["wrong"].get<int64_t>(), 0) << c.dump();
      EXPECT_FALSE(c.contains("error")) << c.dump();
      ops.insert(c["op"].get<std::string>());
      dtypes.insert(c["dtype"].get<std::string>());
      sizes.insert(c["size"].get<int64_t>());
    }
  }
  for (const char* op : {"all_reduce.sum", "all_reduce.max", "all_reduce.min", "all_reduce.avg",
                         "broadcast", "reduce.sum", "all_gather", "reduce_scatter.sum", "all_to_all",
                         "all_to_all.uneven", "send_recv.ring", "barrier", "monitored_barrier"}) {
    EXPECT_TRUE(ops.count(op)) << "missing op " << op;
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"float32", "float64", "bfloat16", "int32", "int64", "none"}));
  EXPECT_TRUE(sizes.count(65537) && sizes.count(7));
}

TEST(Selfcheck, EveryOpExactAtTwoRanks) { expect_selfcheck_passes(2); }

TEST(Selfcheck, EveryOpExactAtFourRanks) { expect_selfcheck_passes(4); }

// The checker must be able to fail: rank 1's all_gather output is corrupted after the op.
TEST(Selfcheck, ReportsCorruptedResultWithRankAndOffset) {
  const std::string dir = scratch("corrupt");
  RunResult r = run_cmd("corrupt",
              launch(3, {DDX_BIN, "probe", "selfcheck", "--sizes", "7", "--dtypes", "float32",
                         "--json", dir + "/r.json"}),
              {{"DDX_FAULT", "corrupt-collective@rank=1,op=all_gather"}});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("all_gather"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("FAIL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 float32 n=7: offset 0"), std::string::npos) << r.output;
  // Every rank ends with the verdict, which names the op and the rank; the launcher blames no one.
  expect_launch_reported_verdict(r.output, 3, 1, "selfcheck: ");
  EXPECT_NE(r.output.find(" FAILED ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; all_gather: rank 1 float32 n=7: offset 0 got "), std::string::npos) << r.output;
  auto report = nlohmann::json::parse(read_file(dir + "/r.json"));
  EXPECT_FALSE(report["passed"].get<bool>());
  EXPECT_EQ(report["failed"].get<int>(), 1);
}

// A DDX_* variable leaked into the test run's own environment (as if set around ctest) does not
// reach the workers: the same corruption that fails the test above is set here in this
// process, and the selfcheck still passes, because every test starts its processes without
// the DDX_* variables it did not set itself (process_helpers.h).
TEST(Selfcheck, LeakedTestVariableDoesNotReachWorkers) {
  ASSERT_EQ(::setenv("DDX_FAULT", "corrupt-collective@rank=1,op=all_gather", 1), 0);
  RunResult r = run_cmd("leaked", launch(2, {DDX_BIN, "probe", "selfcheck", "--sizes", "7", "--dtypes", "float32"}));
  ::unsetenv("DDX_FAULT");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all PASS"), std::string::npos) << r.output;
}

TEST(ProcessGroups, MeshAndSubgroups) {
  RunResult r = run_cmd("mesh", launch(4, {DDX_PG_WORKER, "mesh"}));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS mesh rank 3"), std::string::npos) << r.output;
}

TEST(ProcessGroups, RecordsNumberAndLabelEveryOp) {
  RunResult r = run_cmd("records", launch(2, {DDX_PG_WORKER, "records"}));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS records rank 1"), std::string::npos) << r.output;
}

// Every number the worker prints after `marker` ("rank 0 shutdown took " -> 0.01, ...), in order.
std::vector<double> seconds_after(const std::string& output, const std::string& marker) {
  std::vector<double> found;
  for (size_t at = output.find(marker); at != std::string::npos; at = output.find(marker, at + 1)) {
    found.push_back(std::atof(output.c_str() + at + marker.size()));
  }
  return found;
}

// A collective whose peer never joins fails at the group's timeout (2 s here, not c10d's
// 30 min) with an error naming op and group; shutting down afterwards does not block: every
// rank's shutdown takes well under one collective timeout.
TEST(ProcessGroups, CollectiveTimeoutIsReportedAndShutdownIsPrompt) {
  RunResult r = run_cmd("timeout", launch(2, {DDX_PG_WORKER, "timeout"}), {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all_reduce(sum) #1 on group world (gloo"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS timeout rank 0"), std::string::npos) << r.output;
  const auto timeout = seconds_after(r.output, "collective timeout ");
  ASSERT_EQ(timeout.size(), 2u) << r.output;
  const auto error_after = seconds_after(r.output, "rank 0 error after ");
  ASSERT_EQ(error_after.size(), 1u) << r.output;
  EXPECT_GE(error_after[0], 0.9 * timeout[0]) << r.output;  // it did wait for the timeout
  const auto shutdowns = seconds_after(r.output, " shutdown took ");
  ASSERT_EQ(shutdowns.size(), 2u) << r.output;
  for (double s : shutdowns) EXPECT_LT(s, 0.5 * timeout[0]) << r.output;
}

// Shutdown with an operation still pending returns at once instead of waiting out the
// collective timeout (10 min in this scenario) or the peers' check-out through the store
// (whose timeout is 30 s): it must take under 1 % of the collective timeout.
TEST(ProcessGroups, ShutdownWithPendingOpDoesNotBlock) {
  RunResult r = run_cmd("pending", launch(2, {DDX_PG_WORKER, "shutdown-pending"}), {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto timeout = seconds_after(r.output, "collective timeout ");
  ASSERT_EQ(timeout.size(), 2u) << r.output;
  const auto shutdown = seconds_after(r.output, "shutdown with a pending op took ");
  ASSERT_EQ(shutdown.size(), 1u) << r.output;
  EXPECT_LT(shutdown[0], 0.01 * timeout[0]) << r.output;
}

// Layer-level parity in fp64 (bucketed all-reduce, and the bucketed gradient sum after backward;
// sharded all-gather and reduce-scatter) against the unsharded computation, with the collectives
// counted, at 2 and 4 ranks.
TEST(LayerParity, BucketsAndShardsMatchUnshardedFp64) {
  for (int ranks : {2, 4}) {
    RunResult r = run_cmd("layer" + std::to_string(ranks), launch(ranks, {DDX_PG_WORKER, "layer-parity"}));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("PASS layer-parity rank " + std::to_string(ranks - 1)), std::string::npos) << r.output;
  }
}

// FSDP's unit (fp64, uneven and empty shards): gather, free, re-gather before backward,
// reduce-scatter, exactly, with the collectives counted; at 2, 3 and 4 ranks.
TEST(LayerParity, FsdpUnitMatchesUnshardedFp64) {
  for (int ranks : {2, 3, 4}) {
    RunResult r = run_cmd("fsdp-unit" + std::to_string(ranks), launch(ranks, {DDX_PG_WORKER, "fsdp-unit"}));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("PASS fsdp-unit rank " + std::to_string(ranks - 1)), std::string::npos) << r.output;
  }
}

// The same binary under MPICH's mpiexec: rendezvous over MPI, then the selfcheck.
TEST(Rendezvous, MpiexecRunsSelfcheck) {
  RunResult r = run_cmd("mpiexec", {"/usr/bin/mpiexec.hydra", "-n", "2", DDX_BIN, "probe", "selfcheck",
                          "--sizes", "1,1000", "--dtypes", "float32,int64"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rendezvous via MPICH"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all PASS"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddx::testing
