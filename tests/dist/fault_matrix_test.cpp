// `ddx fault matrix` end to end (CTest label `faults`): every row passes on a 4-rank DDP job;
// with a detector turned off its row fails and the matrix exits non-zero (the matrix can fail);
// a kill at step 13 with checkpoints every 5 steps recovers bit-identically under every strategy.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "faults/kind.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

struct Matrix {
  std::string dir;
  RunResult result;
  nlohmann::json report;
};

// `wrapper`: a command the matrix runs under (setpriv, to drop a capability).
Matrix run_matrix(const std::string& tag, std::vector<std::string> args, int timeout_s,
                  std::vector<std::string> wrapper = {}) {
  Matrix m;
  m.dir = scratch_dir("fault-matrix", tag);
  std::vector<std::string> argv = wrapper;
  for (const char* part : {DDX_BIN, "fault", "matrix", "--out"}) argv.push_back(part);
  argv.push_back(m.dir + "/out");
  argv.insert(argv.end(), args.begin(), args.end());
  m.result = run_in(m.dir, argv, {}, timeout_s);
  std::ifstream in(m.dir + "/out/report.json");
  if (in) m.report = nlohmann::json::parse(in);
  EXPECT_TRUE(processes_left(m.dir).empty()) << "processes left behind by " << tag;
  return m;
}

const nlohmann::json& row(const nlohmann::json& report, const std::string& kind) {
  static const nlohmann::json none;
  for (const auto& r : report.at("rows")) {
    if (r.at("kind") == kind) return r;
  }
  ADD_FAILURE() << "no row " << kind;
  return none;
}

const nlohmann::json& row(const Matrix& m, const std::string& kind) { return row(m.report, kind); }

// The culprit a row's planted fault makes: the rank it names, or for a corrupted checkpoint the
// checkpoint's step. Read from the fault itself, not from the matrix's own expectation.
std::string planted_culprit(const nlohmann::json& r) {
  const std::string first = r.at("faults").at(0).get<std::string>();
  auto value = [&](const std::string& key) {
    const size_t at = first.find(key + "=");
    EXPECT_NE(at, std::string::npos) << first;
    return at == std::string::npos ? "?" : first.substr(at + key.size() + 1, first.find_first_of(",;", at) - at - key.size() - 1);
  };
  if (r.at("kind") == "ckpt-corrupt") return "checkpoint step " + value("step");
  return "rank " + value("rank");
}

// How the launcher must say a process fault's rank ended, from what each fault does
// (faults/kinds/*.cpp): a signal, or the exit code it was given; "" where another detector judges.
std::string planted_ending(const nlohmann::json& r) {
  const std::string kind = r.at("kind").get<std::string>();
  if (kind == "kill" || kind == "ckpt-torn") return "SIGKILL";
  if (kind == "segfault") return "SIGSEGV";
  // An uncaught exception (std::bad_alloc for oom, a filesystem error for disk-full) ends in
  // std::terminate, after the rank's error report.
  if (kind == "abort" || kind == "oom" || kind == "disk-full") return "SIGABRT";
  if (kind == "exit") return "exit " + r.at("faults").at(0).get<std::string>().substr(r.at("faults").at(0).get<std::string>().find("code=") + 5);
  return "";
}

// The checkpoint a recovered row must resume from: the last one before the fault at step 13
// (every 5 steps: 10), or the one before it where the fault spoiled that one. A lost store is
// noticed only when the ranks next use it: from the last checkpoint written before that (-1).
int expected_resume(const nlohmann::json& r) {
  const std::string kind = r.at("kind").get<std::string>();
  if (kind == "store-loss") return -1;
  return kind == "ckpt-torn" || kind == "ckpt-corrupt" || kind == "disk-full" ? 5 : 10;
}

TEST(FaultMatrix, EveryRowPassesOnDdp) {
  // shm-full needs a private /dev/shm (root): without one the matrix is INCOMPLETE (the test below).
  DDX_SKIP_IF_REFUSED(mount_namespace_refused());
  Matrix m = run_matrix("ddp", {"--row-timeout", "120"}, 560);
  ASSERT_EQ(m.result.exit_code, 0) << m.result.output;
  ASSERT_TRUE(m.report.at("passed").get<bool>()) << m.report.dump(2);
  EXPECT_TRUE(m.report.at("reference").at("ok").get<bool>());
  // Every fault kind a job can meet has exactly one row (planted bugs and test switches are not
  // faults of a cluster), and each one was judged on its evidence.
  std::multiset<std::string> rows, kinds;
  for (const auto& r : m.report.at("rows")) rows.insert(r.at("kind").get<std::string>());
  for (const faults::Kind* k : faults::kinds()) {
    if (k->category() != "planted bug" && k->category() != "test") kinds.insert(k->name());
  }
  EXPECT_EQ(rows, kinds) << "the matrix's rows and faults::kinds() differ";
  for (const auto& r : m.report.at("rows")) {
    EXPECT_EQ(r.at("verdict"), "PASS") << r.dump(2);
    EXPECT_TRUE(r.at("detected").get<bool>()) << r.dump(2);
    EXPECT_EQ(r.at("culprit_named").get<std::string>(), planted_culprit(r)) << r.dump(2);
    EXPECT_EQ(r.at("leftover_processes"), 0) << r.dump(2);
    // null: the row's job writes no checkpoints (the pairwise probe).
    EXPECT_NE(r.at("checkpoints_intact"), false) << r.dump(2);
    if (r.at("recovery_applies").get<bool>()) {
      EXPECT_TRUE(r.at("bit_identical").get<bool>()) << r.dump(2);
      if (expected_resume(r) >= 0) EXPECT_EQ(r.at("resume_expected"), expected_resume(r)) << r.dump(2);
      if (expected_resume(r) < 0) EXPECT_GE(r.at("resume_expected").get<int>(), 10) << r.dump(2);
      EXPECT_EQ(r.at("resumed_from"), r.at("resume_expected")) << r.dump(2);
    }
    if (r.at("expected_detector") == "launcher") EXPECT_EQ(r.at("how_named"), planted_ending(r)) << r.dump(2);
  }
  EXPECT_EQ(row(m, "kill").at("culprit_named"), "rank 3");
  EXPECT_EQ(row(m, "hang").at("expected_detector"), "watchdog+analyzer");
  EXPECT_EQ(row(m, "ckpt-corrupt").at("culprit_named"), "checkpoint step 10");
  // shm-full filled a private 64 MiB /dev/shm (ddx launch --shm-size), and the rank's
  // fatal-signal report named it; the restarted group resumed bit-identically (checked above).
  EXPECT_EQ(row(m, "shm-full").at("culprit_named"), "rank 3");
  const std::string job = read_file(m.dir + "/out/shm-full/output.txt");
  EXPECT_NE(job.find("ddx launch: the workers' /dev/shm is a private tmpfs of 64m"), std::string::npos) << job;
  EXPECT_NE(job.find("(/dev/shm) with 0.0 of 64.0 MiB free: shared memory is exhausted"), std::string::npos) << job;
  EXPECT_EQ(row(m, "store-loss").at("culprit_named"), "rank 0");  // the rank that hosted the lost store
  EXPECT_NE(m.result.output.find("fault matrix: " + std::to_string(m.report.at("rows").size()) + " rows, 0 failed"),
            std::string::npos)
      << m.result.output;
  const std::string junit = read_file(m.dir + "/out/junit.xml");
  EXPECT_NE(junit.find("failures=\"0\""), std::string::npos) << junit;
  EXPECT_NE(read_file(m.dir + "/out/table.txt").find("kill "), std::string::npos);
}

// The self-test: the same faults with their detectors turned off must fail their rows, every
// detector that can be turned off (nan-check, replica-check, collective check, straggler
// warning), each row naming the detector that did not fire.
TEST(FaultMatrix, ADisabledDetectorFailsItsRowAndTheMatrix) {
  Matrix m = run_matrix("self-test",
                        {"--kinds", "nan,bitflip,mismatch,straggler", "--without",
                         "nan-check,replica-check,collective check,straggler warning", "--row-timeout", "120"},
                        500);
  EXPECT_EQ(m.result.exit_code, 1) << m.result.output;
  ASSERT_FALSE(m.report.is_null()) << m.result.output;
  EXPECT_FALSE(m.report.at("passed").get<bool>());
  for (const auto& [kind, detector] : std::vector<std::pair<std::string, std::string>>{
           {"nan", "nan-check"}, {"bitflip", "replica-check"}, {"mismatch", "collective check"},
           {"straggler", "straggler warning"}}) {
    const auto& r = row(m, kind);
    EXPECT_EQ(r.at("verdict"), "FAIL") << r.dump(2);
    EXPECT_NE(r.at("note").get<std::string>().find(detector + " did not fire"), std::string::npos) << r.dump(2);
  }
  EXPECT_NE(m.result.output.find("fault matrix: 4 rows, 4 failed: FAIL"), std::string::npos) << m.result.output;
  EXPECT_NE(read_file(m.dir + "/out/junit.xml").find("failures=\"4\""), std::string::npos);
}

// One row run with a second fault planted in every job (after --), which must make that row,
// and so the matrix, FAIL: returns the row's report.
nlohmann::json failed_row(const std::string& tag, const std::string& kind, const std::string& second_fault) {
  Matrix m = run_matrix(tag, {"--kinds", kind, "--row-timeout", "120", "--", "--fault", second_fault}, 300);
  EXPECT_EQ(m.result.exit_code, 1) << m.result.output;
  if (m.report.is_null()) {
    ADD_FAILURE() << m.result.output;
    return nlohmann::json::object();
  }
  EXPECT_FALSE(m.report.at("passed").get<bool>());
  const nlohmann::json r = row(m, kind);
  EXPECT_EQ(r.at("verdict"), "FAIL") << r.dump(2);
  return r;
}

// The wrong-culprit path: a detector that fires but names another rank fails the row. A second
// NaN planted on rank 1 at step 2 makes the nan-check name rank 1 before the row's own fault on
// rank 3 fires; the same fault also fails the clean reference.
TEST(FaultMatrix, ADetectorNamingAnotherRankFailsTheRow) {
  const nlohmann::json r = failed_row("wrong-culprit", "nan", "nan@rank=1,step=2");
  ASSERT_FALSE(r.empty());
  EXPECT_TRUE(r.at("detected").get<bool>()) << r.dump(2);
  EXPECT_EQ(r.at("culprit_named"), "rank 1") << r.dump(2);
  EXPECT_NE(r.at("note").get<std::string>().find("nan-check named rank 1, not rank 3"), std::string::npos) << r.dump(2);
}

// The launcher must name how the rank ended: rank 3 exiting with code 1 at step 12 before the
// row's SIGKILL at step 13 is another failure than the one injected.
TEST(FaultMatrix, ARankEndingAnotherWayThanTheFaultFailsTheRow) {
  const nlohmann::json r = failed_row("wrong-ending", "kill", "exit@rank=3,step=12");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.at("culprit_named"), "rank 3") << r.dump(2);
  EXPECT_EQ(r.at("how_named"), "exit 1") << r.dump(2);
  EXPECT_FALSE(r.at("culprit_correct").get<bool>()) << r.dump(2);
  EXPECT_NE(r.at("note").get<std::string>().find("launcher saw rank 3 end by exit 1, not SIGKILL"), std::string::npos)
      << r.dump(2);
}

// A recovery must resume from the checkpoint the row expects. Step 10's checkpoint corrupted
// makes the kill row's restart fall back to step 5: on this deterministic job the loss curve
// and final weights still equal the reference bit for bit, and the row must fail all the same.
TEST(FaultMatrix, ARecoveryFromAnEarlierCheckpointThanExpectedFailsTheRow) {
  const nlohmann::json r = failed_row("wrong-resume", "kill", "ckpt-corrupt@rank=0,step=10");
  ASSERT_FALSE(r.empty());
  EXPECT_TRUE(r.at("culprit_correct").get<bool>()) << r.dump(2);
  EXPECT_TRUE(r.at("recovered").get<bool>()) << r.dump(2);
  EXPECT_FALSE(r.at("bit_identical").get<bool>()) << r.dump(2);
  EXPECT_EQ(r.at("resumed_from"), 5) << r.dump(2);
  EXPECT_EQ(r.at("resume_expected"), 10) << r.dump(2);
  EXPECT_NE(r.at("recovery").get<std::string>().find(
                "resumed at step 5, not from the checkpoint of step 10; loss curve and final weights bit-identical"),
            std::string::npos)
      << r.dump(2);
}

// Without the capability for a mount namespace the row is SKIPPED, with why, in every report;
// never a fill of the node's own /dev/shm, and the matrix is INCOMPLETE (exit 1), never a PASS.
// Root here, so CAP_SYS_ADMIN is dropped from the matrix's bounding set (setpriv), as for an
// unprivileged user.
TEST(FaultMatrix, ShmFullRowIsSkippedWhereNoPrivateDevShmCanBeMade) {
  Matrix m = run_matrix("shm-full-skip", {"--kinds", "shm-full", "--row-timeout", "120"}, 300,
                        {"/usr/bin/setpriv", "--bounding-set", "-sys_admin", "--"});
  EXPECT_EQ(m.result.exit_code, 1) << m.result.output;
  ASSERT_FALSE(m.report.is_null()) << m.result.output;
  EXPECT_FALSE(m.report.at("passed").get<bool>()) << m.report.dump(2);
  const auto& r = row(m, "shm-full");
  EXPECT_EQ(r.at("verdict"), "SKIPPED") << r.dump(2);
  EXPECT_TRUE(r.at("skipped").get<bool>()) << r.dump(2);
  EXPECT_FALSE(r.at("detected").get<bool>()) << r.dump(2);
  EXPECT_NE(r.at("note").get<std::string>().find("unshare(CLONE_NEWNS): Operation not permitted"), std::string::npos)
      << r.dump(2);
  EXPECT_FALSE(std::filesystem::exists(m.dir + "/out/shm-full")) << "the row's job ran";
  EXPECT_NE(m.result.output.find("fault matrix: 1 rows, 0 failed, 1 skipped: INCOMPLETE"), std::string::npos)
      << m.result.output;
  const std::string junit = read_file(m.dir + "/out/junit.xml");
  EXPECT_NE(junit.find("failures=\"0\" skipped=\"1\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<skipped message=\"needs a private /dev/shm"), std::string::npos) << junit;
  EXPECT_NE(read_file(m.dir + "/out/table.txt").find("SKIPPED"), std::string::npos);
}

// --- across nodes: one matrix per "node" (2 x 2 ranks over loopback), node 0 judges ---

struct Nodes {
  std::string dir;
  RunResult node[2];
  nlohmann::json report;  // node 0's
};

// `ddx fault matrix --nnodes 2 --node-rank I ...` for I = 0, 1 at once, as srun would start them.
Nodes run_on_two_nodes(const std::string& tag, std::vector<std::string> args, int timeout_s) {
  Nodes n;
  n.dir = scratch_dir("fault-matrix", tag);
  // Three ports: the matrix's store, then its jobs' rendezvous, and theirs after a restart (the
  // kill row restarts).
  const std::string port = std::to_string(free_ports_in_a_row(3));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> argv = {DDX_BIN, "fault", "matrix", "--nnodes", "2", "--node-rank", std::to_string(node),
                                     "--master-addr", "127.0.0.1", "--master-port", port, "-np", "2",
                                     "--out", n.dir + "/out"};
    argv.insert(argv.end(), args.begin(), args.end());
    nodes.push_back(std::make_unique<ChildProcess>(argv, std::map<std::string, std::string>{},
                                                   n.dir + "/node" + std::to_string(node) + ".txt"));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (int node = 0; node < 2; ++node) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const auto status = nodes[node]->wait(std::max(left, std::chrono::milliseconds(1)));
    n.node[node].output = nodes[node]->output();
    if (!status) n.node[node].output += "\n[test] TIMED OUT after " + std::to_string(timeout_s) + " s";
    if (status && WIFEXITED(*status)) n.node[node].exit_code = WEXITSTATUS(*status);
  }
  nodes.clear();  // kills whatever timed out, with its process group
  std::ifstream in(n.dir + "/out/report.json");
  if (in) n.report = nlohmann::json::parse(in);
  EXPECT_TRUE(processes_left(n.dir).empty()) << "processes left behind by " << tag;
  return n;
}

std::string both(const Nodes& n) { return "--- node 0 ---\n" + n.node[0].output + "\n--- node 1 ---\n" + n.node[1].output; }

// The fault is on rank 3, a rank of node 1; node 0's launcher sees only the consequences. Node
// 0 reads every node's evidence, and the restarted group resumes on both nodes bit-identically.
TEST(FaultMatrix, TwoNodesRunTheRowsInLockStepAndNodeZeroJudges) {
  Nodes n = run_on_two_nodes("two-nodes", {"--kinds", "kill,nan", "--row-timeout", "150"}, 500);
  ASSERT_EQ(n.node[0].exit_code, 0) << both(n);
  ASSERT_EQ(n.node[1].exit_code, 0) << both(n);
  ASSERT_FALSE(n.report.is_null()) << both(n);
  for (const std::string kind : {"kill", "nan"}) {
    const auto& r = row(n.report, kind);
    EXPECT_EQ(r.at("verdict"), "PASS") << r.dump(2);
    EXPECT_EQ(r.at("culprit_named"), "rank 3") << r.dump(2);
    EXPECT_EQ(r.at("leftover_processes"), 0) << r.dump(2);
    EXPECT_TRUE(r.at("bit_identical").get<bool>()) << r.dump(2);
  }
  EXPECT_NE(n.node[0].output.find("under ddx launch -np 2 on each of 2 nodes (this is node 0, which judges)"),
            std::string::npos) << both(n);
  // Node 1 ran its half of every job, printed node 0's verdict, and wrote no report.
  EXPECT_NE(n.node[1].output.find("node 1's part: exit 0"), std::string::npos) << both(n);
  EXPECT_NE(n.node[1].output.find("fault matrix: 2 rows, 0 failed: PASS; node 0 writes the reports"), std::string::npos)
      << both(n);
  // Rank 3's lines: "[rank 3]: ..." from the launcher, or ddx's own "[rank 3/4 host:pid] ...".
  EXPECT_NE(read_file(n.dir + "/out/kill/node1/output.txt").find("[rank 3"), std::string::npos);
}

// The self-test across nodes: with --nan-check left out the nan row fails on node 0's judgement,
// and every node exits 1.
TEST(FaultMatrix, TwoNodesADisabledDetectorStillFailsItsRow) {
  Nodes n = run_on_two_nodes("two-nodes-self-test", {"--kinds", "nan", "--without", "nan-check", "--row-timeout", "150"},
                             400);
  EXPECT_EQ(n.node[0].exit_code, 1) << both(n);
  EXPECT_EQ(n.node[1].exit_code, 1) << both(n);
  ASSERT_FALSE(n.report.is_null()) << both(n);
  const auto& r = row(n.report, "nan");
  EXPECT_EQ(r.at("verdict"), "FAIL") << r.dump(2);
  EXPECT_NE(r.at("note").get<std::string>().find("nan-check did not fire"), std::string::npos) << r.dump(2);
  EXPECT_NE(n.node[1].output.find("fault matrix: 1 rows, 1 failed: FAIL; node 0 writes the reports"), std::string::npos)
      << both(n);
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
  Matrix port = run_matrix("bad-port", {"--nnodes", "2", "--node-rank", "1"}, 60);
  EXPECT_EQ(port.result.exit_code, 2) << port.result.output;
  EXPECT_NE(port.result.output.find("--master-port is required with --nnodes > 1"), std::string::npos) << port.result.output;
  EXPECT_TRUE(kind.report.is_null() && off.report.is_null() && rank.report.is_null() && port.report.is_null());
  // A strategy that refuses a row's detector flag: one usage error naming the row, after the
  // reference run, instead of every row failing for want of a reference.
  Matrix refused = run_matrix("bad-strategy-rows", {"--strategy", "2d", "-m", "debug-tp", "--kinds", "kill,nan", "--", "--tp", "2"}, 120);
  EXPECT_EQ(refused.result.exit_code, 2) << refused.result.output;
  EXPECT_NE(refused.result.output.find("ddx: error: --strategy 2d cannot run the row(s) nan (ddx train: --nan-check: "),
            std::string::npos)
      << refused.result.output;
  EXPECT_EQ(refused.result.output.find("[1/2]"), std::string::npos) << refused.result.output;
  EXPECT_TRUE(refused.report.is_null()) << refused.report.dump();
  // The node flags: each a one-line error naming its flag, before any store or job starts.
  const std::vector<std::pair<std::vector<std::string>, std::string>> node_cases = {
      {{"--nnodes", "0"}, "--nnodes"},
      {{"--nnodes", "2", "--node-rank", "2", "--master-port", "29611"}, "--node-rank 2 is outside [0, 2) for --nnodes 2"},
      {{"--node-rank", "-1"}, "--node-rank -1 is outside [0, 1)"},
      {{"--nnodes", "2", "--master-port", "70000"}, "--master-port 70000 is outside 1..65533"},
      // Its jobs restart at the port two above: 65534 would leave a recovering row no port.
      {{"--nnodes", "2", "--master-port", "65534"}, "--master-port 65534 is outside 1..65533"},
      {{"--nnodes", "2", "--master-port", "abc"}, "--master-port"},
  };
  for (const auto& [args, mention] : node_cases) {
    Matrix bad = run_matrix("bad-node-flags", args, 60);
    EXPECT_EQ(bad.result.exit_code, 2) << mention << ": " << bad.result.output;
    EXPECT_EQ(std::count(bad.result.output.begin(), bad.result.output.end(), '\n'), 1) << bad.result.output;
    EXPECT_NE(bad.result.output.find(mention), std::string::npos) << bad.result.output;
    EXPECT_TRUE(bad.report.is_null()) << mention;
  }
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
