// ddx under a real SLURM: a private slurmctld and a slurmd on each of two simulated hosts
// (slurm_cluster.h), jobs started with the real srun and sbatch as a user starts them. Label
// `slurm`. Every test ends with no task, step or daemon left on either host.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cctype>
#include <sstream>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ddx/rendezvous/cpu_threads.h"
#include "ddx/watchdog/job_event_records.h"
#include "ddx/watchdog/watchdog.h"
#include "process_helpers.h"
#include "slurm_cluster.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("slurm", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cluster_ = std::make_unique<SlurmCluster>(dir_, timeouts());
    // Why skip: the cluster's hosts need network, UTS and mount namespaces (root) and Debian's
    // SLURM packages (ci/bootstrap.sh installs them); CI is root and has both, so there a
    // refusal fails instead (DDX_REQUIRE_PRIVILEGED_TESTS).
    DDX_SKIP_IF_REFUSED(cluster_->refused());
    ASSERT_TRUE(cluster_->failed().empty()) << cluster_->failed();
  }

  // SLURM's own timeouts for this test's cluster (slurm_cluster.h: short by default).
  virtual SlurmTimeouts timeouts() const { return {}; }

  void TearDown() override {
    if (cluster_ && cluster_->refused().empty() && cluster_->failed().empty()) {
      const auto left = cluster_->tasks_left();
      std::string names;
      for (const auto& p : left) names += p + "; ";
      EXPECT_TRUE(left.empty()) << "left on the hosts after the test: " << names;
    }
    cluster_.reset();
  }

  // `srun <srun_args> <command>` on the login node.
  RunResult srun(const std::vector<std::string>& srun_args, const std::vector<std::string>& command,
                 std::map<std::string, std::string> env = {}, int timeout_s = 180) {
    return cluster_->run(joined(joined({"/usr/bin/srun"}, srun_args), command), std::move(env), timeout_s);
  }

  // `ddx train` with the common test settings, its metrics in <dir>/<name>.jsonl.
  std::vector<std::string> train(const std::string& name, const std::vector<std::string>& args, int steps = 4) const {
    return joined({DDX_BIN, "train", "-s", "32", "--max-steps", std::to_string(steps), "--lr", "3e-3", "--seed", "7", "--log-freq", "1",
                   "--no-progress", "--save-dir", dir_ + "/" + name, "--metrics-file", dir_ + "/" + name + ".jsonl"},
                  args);
  }

  // Each step's loss and gradient norm, as written: equal runs give equal text.
  std::vector<std::string> curve(const std::string& name) const {
    std::vector<std::string> out;
    std::ifstream in(dir_ + "/" + name + ".jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line);
      out.push_back(record.at("loss").dump() + " " + record.at("grad_norm").dump());
    }
    return out;
  }

  // Where the job resumed, from its job events (DDX_EVENTS_FILE, docs/faults.md), not its log
  // text: the step of every `train.resumed` that came after the fault fired. A run that says
  // "resuming from" and trains from scratch ends bit-identical too; this tells them apart.
  static std::vector<int64_t> resumed_after_the_fault(const std::string& events_file) {
    int64_t fired = -1;
    std::vector<int64_t> steps;
    for (const auto& e : events::read_records(events_file)) {
      if (e.name == "fault.fired" && fired < 0) fired = e.unix_us;
      if (e.name == "train.resumed" && fired >= 0 && e.unix_us > fired) steps.push_back(e.record.value("step", int64_t{-1}));
    }
    return steps;
  }

  RunResult launch_on_this_host(int np, const std::vector<std::string>& command,
                                std::map<std::string, std::string> env = {}) {
    return run_in(dir_, joined({DDX_BIN, "launch", "-np", std::to_string(np), "--"}, command), std::move(env), 240);
  }

  std::string dir_;
  std::unique_ptr<SlurmCluster> cluster_;
};

// The issue's own case: srun sets no OMP_NUM_THREADS, ddx launch sets 1; the loss differed at
// step 7 by 1.2e-7. Each rank now picks its threads itself from its node (cores / ranks on the
// node; ddx launch marks its 1 as its own), so the same layout gives the same count and the same
// sums whoever started it. One rank, so that the count is the whole machine: at 4 ranks on 2
// cores both sides get 1 thread, and a rank that took ddx launch's 1 would pass unseen.
TEST_F(Slurm, SrunAndDdxLaunchGiveTheSameLossesOnTheSameLayout) {
  const int cores = cores_in_affinity_mask();
  // Why skip: on one core the whole machine is 1 thread, the launcher's 1 too; nothing to tell apart.
  if (cores < 2) GTEST_SKIP() << "one core: a rank that took ddx launch's OMP_NUM_THREADS=1 gets the whole machine anyway";
  const std::string threads = std::to_string(cores) + " CPU thread(s) per rank (" + std::to_string(cores) + " cores / 1 rank on this node)";
  RunResult r = srun({"-N", "1", "-n", "1"}, train("srun", {"--strategy", "ddp", "-m", "debug"}, 8));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, ", " + threads)) << threads << "\n" << r.output;
  RunResult local = launch_on_this_host(1, train("launch", {"--strategy", "ddp", "-m", "debug"}, 8));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  EXPECT_TRUE(has(local.output, ", " + threads)) << threads << "\n" << local.output;
  ASSERT_EQ(curve("srun").size(), 8u) << r.output;
  EXPECT_EQ(curve("srun"), curve("launch"));
}

struct Strategy {
  std::string name;
  std::vector<std::string> args;
};
void PrintTo(const Strategy& s, std::ostream* os) { *os << s.name; }

class SlurmStrategies : public Slurm, public ::testing::WithParamInterface<Strategy> {};

// `srun -N 2 --ntasks-per-node 2 ddx train`: ranks, world, local rank and node from SLURM, the
// master from the node list; the losses equal `ddx launch -np 4` on one host. Across layouts
// (2 ranks per node here, 4 there) the cores per rank differ by design, so both run one thread:
// what is compared is the rendezvous and the network path, bit for bit.
TEST_P(SlurmStrategies, TwoNodesMatchDdxLaunchOnOneHostBitForBit) {
  const Strategy& s = GetParam();
  const std::map<std::string, std::string> one_thread = {{"DDX_CPU_THREADS", "1"}};
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "2"}, train("srun", s.args), one_thread);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "rank 0/4 ddx-host-a:")) << r.output;
  RunResult local = launch_on_this_host(4, train("launch", s.args), one_thread);
  ASSERT_EQ(local.exit_code, 0) << local.output;
  ASSERT_EQ(curve("srun").size(), 4u) << r.output;
  EXPECT_EQ(curve("srun"), curve("launch"));
}

INSTANTIATE_TEST_SUITE_P(
    Every, SlurmStrategies,
    ::testing::Values(Strategy{"ddp", {"--strategy", "ddp", "-m", "debug"}},
                      Strategy{"fsdp", {"--strategy", "fsdp", "-m", "debug"}},
                      Strategy{"tp", {"--strategy", "tp", "-m", "debug-tp"}},
                      Strategy{"twod", {"--strategy", "2d", "-m", "debug-tp", "--tp", "2"}},
                      Strategy{"pp", {"--strategy", "pp", "-m", "debug-pp", "-b", "2", "--microbatches", "2"}}),
    [](const auto& info) { return info.param.name; });

// torchrun's pattern: one launcher per node, started by srun; no --nnodes, --node-rank or
// --master-addr. Same layout as srun starting the ranks itself, so the same losses.
TEST_F(Slurm, OneDdxLaunchPerNodeTakesTheNodesFromTheStep) {
  const auto args = std::vector<std::string>{"--strategy", "ddp", "-m", "debug"};
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "1"},
                     joined({DDX_BIN, "launch", "--nproc-per-node", "2", "--"}, train("launch", args)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "ddx launch: node 1 of 2 of SLURM step ")) << r.output;
  EXPECT_TRUE(has(r.output, "master ddx-host-a:")) << r.output;
  EXPECT_TRUE(has(r.output, "starting 2 workers (node 1 of 2, world size 4")) << r.output;
  RunResult direct = srun({"-N", "2", "--ntasks-per-node", "2"}, train("srun", args));
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  ASSERT_EQ(curve("launch").size(), 4u) << r.output;
  EXPECT_EQ(curve("launch"), curve("srun"));
}

// `ddx launch --max-restarts` inside an allocation, one launcher per node: rank 3 (host b) is
// killed at step 7; each node's launcher restarts its own workers (attempt 2 rendezvouses at
// the step's port + 1), which resume from the step-5 checkpoint and end where a run that was
// never killed ends, every step equal.
TEST_F(Slurm, DdxLaunchRestartsInsideAnAllocationResumeBitIdentical) {
  const auto args = std::vector<std::string>{"--strategy", "ddp", "-m", "debug", "--ckpt-freq", "5", "-e", "run"};
  auto launch = [&](const std::string& name, std::map<std::string, std::string> env) {
    return srun({"-N", "2", "--ntasks-per-node", "1"},
                joined({DDX_BIN, "launch", "--nproc-per-node", "2", "--max-restarts", "1", "--"}, train(name, args, 10)),
                std::move(env), 300);
  };
  RunResult clean = launch("clean", {});
  ASSERT_EQ(clean.exit_code, 0) << clean.output;
  const std::string events = dir_ + "/faulted-events.jsonl";
  RunResult faulted = launch("faulted", {{"DDX_FAULT", "kill@rank=3,step=7"}, {"DDX_EVENTS_FILE", events}});
  ASSERT_EQ(faulted.exit_code, 0) << faulted.output;
  EXPECT_TRUE(has(faulted.output, "attempt 1 failed: rank 3 SIGKILL")) << faulted.output;
  EXPECT_TRUE(has(faulted.output, "resuming from ")) << faulted.output;
  EXPECT_EQ(resumed_after_the_fault(events), std::vector<int64_t>{5}) << read_file(events) << faulted.output;
  ASSERT_EQ(curve("clean").size(), 10u) << clean.output;
  EXPECT_EQ(curve("faulted"), curve("clean")) << faulted.output;
}

TEST_F(Slurm, SelfcheckNamesBothHosts) {
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "2"}, {DDX_BIN, "probe", "selfcheck"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "4 ranks on 2 hosts [ddx-host-a (2 ranks), ddx-host-b (2 ranks)]")) << r.output;
  EXPECT_TRUE(has(r.output, "all PASS")) << r.output;
}

TEST_F(Slurm, BandwidthMatrixNamesTheHosts) {
  const std::string json = dir_ + "/pairs.json";
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "2"},
                     {DDX_BIN, "probe", "bandwidth", "--pairs", "-e", "64K", "-n", "3", "-w", "1", "--json", json});
  // The probe's verdict may be 1 on a loaded machine (a slow link); never a crash or a hang.
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;
  EXPECT_TRUE(has(r.output, "ddx-host-a:0")) << r.output;
  EXPECT_TRUE(has(r.output, "ddx-host-b:1")) << r.output;  // host:local rank
  EXPECT_TRUE(has(r.output, "(6 links,")) << r.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(json))["ddx"]["matrix_gbs"].size(), 4u);
}

// A rank on the second host never joins; the watchdogs dump and the analyzer names it and its host.
TEST_F(Slurm, PlantedHangOnTheSecondHostIsBlamedOnItsRankAndHost) {
  const std::string traces = dir_ + "/traces";
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "2"},
                     {DDX_BIN, "probe", "hang", "--worker", "--scenario", "straggler", "--culprit-rank", "3",
                      "--timeout", "2s", "--trace-dir", traces},
                     {}, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;  // the watchdog ends the job
  RunResult verdict = run_in(dir_, {DDX_BIN, "analyze", traces}, {}, 60);
  EXPECT_TRUE(has(verdict.output, "VERDICT: never-joined: rank 3")) << verdict.output << r.output;
  EXPECT_TRUE(has(verdict.output, "[culprit: rank 3 (ddx-host-b, pid")) << verdict.output;
}

// ddx started by srun with a layout it cannot build: every task says so in one line naming the
// variable or flag, the step ends, no task hangs.
TEST_F(Slurm, AnImpossibleLayoutFailsOnEveryTaskWithOneLine) {
  // 3 tasks and --tp 2: the world is not a multiple of the TP degree.
  RunResult r = srun({"-N", "2", "-n", "3"}, train("bad", {"--strategy", "2d", "-m", "debug-tp", "--tp", "2"}), {}, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "TIMED OUT")) << r.output;
  EXPECT_FALSE(has(r.output, "terminate called")) << r.output;
  size_t lines = 0;
  for (size_t at = r.output.find("ddx: error: "); at != std::string::npos; at = r.output.find("ddx: error: ", at + 1)) ++lines;
  EXPECT_EQ(lines, 3u) << r.output;
  EXPECT_TRUE(has(r.output, "--tp 2")) << r.output;
}

// One task per node asking each launcher for 3 workers: a world of 6 that --tp 4 cannot split.
// Every worker on both nodes says so in one line; both launchers end, no task hangs.
TEST_F(Slurm, OneLauncherPerNodeAskedForAWorldItCannotBuildFailsEveryWorkerWithOneLine) {
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "1"},
                     joined({DDX_BIN, "launch", "--nproc-per-node", "3", "--"},
                            train("bad", {"--strategy", "tp", "-m", "debug-tp", "--tp", "4"})),
                     {}, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "TIMED OUT")) << r.output;
  EXPECT_FALSE(has(r.output, "terminate called")) << r.output;
  // A worker its launcher stopped after a sibling failed may end before printing its line; the
  // launcher's table then says so.
  for (int rank = 0; rank < 6; ++rank) {
    const bool said = has(r.output, "[rank " + std::to_string(rank) + "]: ddx: error: --tp 4 does not match the world size 6");
    const bool stopped = std::regex_search(
        r.output, std::regex("\\n  " + std::to_string(rank) + " +[0-9] +ddx-host-[ab] +[0-9]+ +SIGTERM \\(signal 15\\) +stopped by launcher"));
    EXPECT_TRUE(said || stopped) << "rank " << rank << "\n" << r.output;
  }
  // Each node's launcher reports its own workers' failure (whichever of them exited first).
  EXPECT_TRUE(std::regex_search(r.output, std::regex("Root cause: rank [0-2] \\(local rank [0-2]\\) on ddx-host-a"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("Root cause: rank [3-5] \\(local rank [0-2]\\) on ddx-host-b"))) << r.output;
}

// A node list ddx cannot parse (here a task's own SLURM_STEP_NODELIST overridden, as a broken
// prolog or wrapper would leave it): every task names the variable in one line and exits.
TEST_F(Slurm, ANodeListDdxCannotParseFailsEveryTaskNamingTheVariable) {
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "1"},
                     joined({"/usr/bin/env", "SLURM_STEP_NODELIST=ddx-host-[a"}, train("bad", {"--strategy", "ddp", "-m", "debug"})),
                     {}, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "TIMED OUT")) << r.output;
  size_t lines = 0;
  for (size_t at = r.output.find("ddx: error: "); at != std::string::npos; at = r.output.find("ddx: error: ", at + 1)) ++lines;
  EXPECT_EQ(lines, 2u) << r.output;
  EXPECT_TRUE(has(r.output, "SLURM_STEP_NODELIST")) << r.output;
}

// examples/slurm/validate.sbatch as a user submits it: ddx validate once in the batch script,
// every stage's ranks started by srun over both hosts, the parity stage included.
TEST_F(Slurm, ValidateSbatchRunsEveryStageOverBothHosts) {
  const std::string out = dir_ + "/validate";
  RunResult r = cluster_->run({"/usr/bin/sbatch", "--wait", "-o", dir_ + "/validate.out",
                               std::string(DDX_SOURCE_DIR) + "/examples/slurm/validate.sbatch", "--max-bytes", "64K",
                               "--parity-steps", "2", "--burn-in-steps", "4", "--keep-going"},
                              {{"DDX", DDX_BIN}, {"OUT", out}}, 540);
  const std::string log = read_file(dir_ + "/validate.out");
  ASSERT_FALSE(has(r.output, "TIMED OUT")) << r.output << log;
  EXPECT_TRUE(has(log, "ddx validate: 4 ranks per stage (SLURM_NTASKS=4) under 'srun'")) << log;
  const auto report = nlohmann::json::parse(read_file(out + "/validate.json"), nullptr, false);
  ASSERT_TRUE(report.is_object()) << log;
  // sbatch --wait exits with the script's status, which is validate's: 0 when every stage passed.
  EXPECT_EQ(r.exit_code, report.at("passed").get<bool>() ? 0 : 1) << r.output << log;
  std::map<std::string, bool> passed;
  std::map<std::string, int> exit_code;
  for (const auto& stage : report.at("stages")) {
    EXPECT_TRUE(stage.at("ran").get<bool>()) << stage.dump();
    passed[stage.at("stage")] = stage.at("passed").get<bool>();
    exit_code[stage.at("stage")] = stage.at("exit_code").get<int>();
  }
  ASSERT_EQ(passed.size(), 9u) << report.dump(2);
  // Verdicts that do not depend on how fast this shared machine's links are at the moment.
  for (const char* stage : {"doctor", "gpu health", "selfcheck", "parity", "burn-in"}) EXPECT_TRUE(passed[stage]) << stage << "\n" << log;
  // The others may name a slow rank or link on this loaded machine (exit 1), but each must
  // reach its verdict: not a crash under srun, not an error (exit 2), not a timeout (-1).
  for (const std::string stage : {"compute", "memory", "bandwidth", "pairwise links"}) {
    const std::string stage_log = std::regex_replace(stage, std::regex(" "), "-") + ".log";
    EXPECT_TRUE(exit_code[stage] == 0 || exit_code[stage] == 1) << stage << ": exit " << exit_code[stage] << "\n"
                                                                << read_file(out + "/" + stage_log) << log;
  }
  // Each over all 4 ranks of both hosts.
  const std::vector<std::string> both_hosts = {"ddx-host-a", "ddx-host-b"};
  for (const char* probe : {"compute", "memory"}) {
    const auto j = nlohmann::json::parse(read_file(out + "/" + probe + ".json"), nullptr, false);
    if (!j.is_object()) {
      ADD_FAILURE() << "no " << probe << ".json\n" << log;
      continue;
    }
    EXPECT_EQ(j.value("world_size", 0), 4) << probe << "\n" << j.dump(1);
    EXPECT_EQ(j.value("hosts", std::vector<std::string>{}), both_hosts) << probe << "\n" << j.dump(1);
    EXPECT_EQ(j.at("ranks").size(), 4u) << probe << "\n" << j.dump(1);
  }
  const auto bandwidth = nlohmann::json::parse(read_file(out + "/bandwidth.json"), nullptr, false);
  if (bandwidth.is_object()) {
    EXPECT_EQ(bandwidth.value(nlohmann::json::json_pointer("/ddx/nranks"), 0), 4) << bandwidth.dump(1);
    EXPECT_FALSE(bandwidth.value("results", nlohmann::json::array()).empty()) << bandwidth.dump(1);
  } else {
    ADD_FAILURE() << "no bandwidth.json\n" << log;
  }
  const auto doctor = nlohmann::json::parse(read_file(out + "/doctor.json"), nullptr, false);
  if (doctor.is_object()) {
    EXPECT_EQ(doctor.value("world_size", 0), 4) << doctor.dump(1);
    std::set<std::string> doctor_hosts;
    for (const auto& rank : doctor.value("ranks", nlohmann::json::array())) doctor_hosts.insert(rank.value("host", ""));
    EXPECT_EQ(doctor_hosts, std::set<std::string>(both_hosts.begin(), both_hosts.end())) << doctor.dump(1);
  } else {
    ADD_FAILURE() << "no doctor.json\n" << log;
  }
  const auto pairs = nlohmann::json::parse(read_file(out + "/pairs.json"), nullptr, false);
  ASSERT_TRUE(pairs.is_object()) << log;
  EXPECT_EQ(pairs["ddx"]["matrix_gbs"].size(), 4u);
  EXPECT_TRUE(has(read_file(out + "/pairwise-links.log"), "ddx-host-b:1")) << log;
}

// examples/slurm/train.sbatch: rank 3 (host b) is killed at step 7; the script requeues the
// job, which resumes from the step-5 checkpoint and ends where a run that was never killed ends.
TEST_F(Slurm, TrainSbatchRequeuedAfterAKillEndsBitIdentical) {
  const std::string script = std::string(DDX_SOURCE_DIR) + "/examples/slurm/train.sbatch";
  const std::vector<std::string> train_args = {"-m", "debug", "-s", "32", "--max-steps", "10", "--ckpt-freq", "5",
                                               "--checksum-freq", "1", "--log-freq", "1", "--seed", "7"};
  auto submit = [&](const std::string& name, std::map<std::string, std::string> env) {
    env.insert({{"DDX", DDX_BIN}, {"SAVE_DIR", dir_ + "/runs"}, {"EXPERIMENT", name}});
    return cluster_->run(joined({"/usr/bin/sbatch", "--wait", "-o", dir_ + "/" + name + ".out", script}, train_args),
                         env, 300);
  };
  RunResult clean = submit("clean", {});
  ASSERT_EQ(clean.exit_code, 0) << clean.output << read_file(dir_ + "/clean.out");
  const std::string events = dir_ + "/faulted-events.jsonl";
  RunResult faulted = submit("faulted", {{"DDX_FAULT", "kill@rank=3,step=7"}, {"DDX_EVENTS_FILE", events}});
  const std::string log = read_file(dir_ + "/faulted.out");
  ASSERT_EQ(faulted.exit_code, 0) << faulted.output << log;
  EXPECT_TRUE(has(log, "train.sbatch: the step failed")) << log;
  EXPECT_TRUE(has(log, "attempt 2,")) << log;
  EXPECT_TRUE(has(log, "resuming from ")) << log;
  EXPECT_EQ(resumed_after_the_fault(events), std::vector<int64_t>{5}) << read_file(events) << log;
  auto last = [&](const std::string& name) {
    std::ifstream in(dir_ + "/runs/" + name + "/metrics.jsonl");
    nlohmann::json record;
    for (std::string line; std::getline(in, line);) record = nlohmann::json::parse(line);
    return record;
  };
  const auto a = last("clean"), b = last("faulted");
  ASSERT_EQ(a.value("step", 0), 10) << a.dump();
  ASSERT_EQ(b.value("step", 0), 10) << b.dump();
  EXPECT_EQ(a.at("param_checksum"), b.at("param_checksum"));
  EXPECT_EQ(a.at("loss"), b.at("loss"));
}

// examples/slurm/fault-matrix.sbatch: one ddx fault matrix per node, nodes from the step, rows
// in lock-step over both hosts.
TEST_F(Slurm, FaultMatrixSbatchRunsItsRowsAcrossBothHosts) {
  const std::string out = dir_ + "/matrix";
  RunResult r = cluster_->run({"/usr/bin/sbatch", "--wait", "-o", dir_ + "/matrix.out",
                               std::string(DDX_SOURCE_DIR) + "/examples/slurm/fault-matrix.sbatch", "--kinds",
                               "kill,hang"},
                              {{"DDX", DDX_BIN}, {"OUT", out}}, 540);
  const std::string log = read_file(dir_ + "/matrix.out");
  ASSERT_EQ(r.exit_code, 0) << r.output << log;
  EXPECT_TRUE(has(log, "ddx fault matrix: node 1 of 2 of SLURM step ")) << log;
  const auto report = nlohmann::json::parse(read_file(out + "/report.json"), nullptr, false);
  ASSERT_TRUE(report.is_object()) << log;
  size_t passed = 0;
  for (const auto& row : report.at("rows")) passed += row.value("verdict", "") == "PASS";
  EXPECT_EQ(passed, 2u) << report.dump(2);
}

// One worker on the second host is SIGKILLed: the step ends, and that host's launcher names
// the rank and the host as the root cause.
TEST_F(Slurm, AWorkerKilledOnTheSecondHostIsNamedWithItsHost) {
  RunResult r = srun({"-N", "2", "--ntasks-per-node", "1"},
                     joined({DDX_BIN, "launch", "--nproc-per-node", "2", "--"},
                            train("killed", {"--strategy", "ddp", "-m", "debug"}, 8)),
                     {{"DDX_FAULT", "kill@rank=3,step=3"}}, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "TIMED OUT")) << r.output;
  EXPECT_TRUE(has(r.output, "Root cause: rank 3 (local rank 1) on ddx-host-b, pid ")) << r.output;
  EXPECT_TRUE(has(r.output, "SIGKILL (signal 9)")) << r.output;
}

// A lost host, judged by how ddx alone ends the job. SLURM's own timeouts are raised far above
// ddx's (a silent node set DOWN after 300 s, a cancelled step's tasks given 300 s before
// SIGKILL), so that SLURM cannot end the step first and hide a ddx hang. Once the surviving
// host's tasks have ended, the test sets the lost node DOWN itself, as an administrator would,
// and the step ends.
class SlurmLostNode : public Slurm {
 protected:
  SlurmTimeouts timeouts() const override { return {/*slurmd=*/300, /*message=*/60, /*kill_wait=*/300}; }

  static constexpr int kCollectiveTimeoutS = 8;
  // The collective timeout, the watchdog's exchange with its peers (their state, at most 1.5 s;
  // their dumps, at most 5 s), and room for a loaded 2-core machine: 13.2 to 13.5 s measured.
  // Below the backend's own timeout (the collective timeout + 15 s, trainer.cpp), far below
  // SLURM's 300 s: a job that only Gloo's exception or SLURM would end fails it.
  static constexpr double kBoundS = kCollectiveTimeoutS + 5 + 7;

  struct Loss {
    std::string output;   // what the job printed
    double seconds = -1;  // from the loss until every task of host a had ended; -1: not within 120 s; -2: never lost
    std::map<int, std::string> ended;  // host a's tasks as srun reported their end: "Exited with exit code 124"
  };

  // srun's line for each task of `host` that ended: "srun: error: ddx-host-a: tasks 0-1: Exited with exit code 124".
  static std::map<int, std::string> tasks_ended_on(const std::string& host, const std::string& output) {
    std::map<int, std::string> ended;
    const std::regex line("srun: error: " + host + ": tasks? ([0-9,-]+): ([^\\n]+)");
    for (std::sregex_iterator m(output.begin(), output.end(), line), end; m != end; ++m) {
      std::istringstream ranges((*m)[1].str());
      for (std::string range; std::getline(ranges, range, ',');) {
        const size_t dash = range.find('-');
        const int first = std::stoi(range.substr(0, dash));
        const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
        for (int task = first; task <= last; ++task) ended[task] = (*m)[2].str();
      }
    }
    return ended;
  }

  // The second host is lost whole (link down, then its slurmd and tasks killed: no connection
  // is closed, the others only hear silence) while `command` trains, once it is past step 5.
  Loss lose_the_second_host_during(const std::vector<std::string>& command, size_t tasks_on_a) {
    const std::string output = dir_ + "/lost.txt";
    auto job = cluster_->start(command, {{"DDX_COLLECTIVE_TIMEOUT", std::to_string(kCollectiveTimeoutS) + "s"}}, output);
    for (int i = 0; i < 600 && !has(read_file(output), "step 5/"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Loss loss;
    if (!has(read_file(output), "step 5/")) return {read_file(output), -2, {}};
    std::this_thread::sleep_for(std::chrono::seconds(3));  // a few heartbeats (1 s apart) published first
    cluster_->lose_node(1);
    const auto lost = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - lost < std::chrono::seconds(120)) {
      if (tasks_ended_on("ddx-host-a", read_file(output)).size() >= tasks_on_a) {
        loss.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - lost).count();
        std::printf("host a's tasks ended %.1f s after the loss (bound %.0f s)\n", loss.seconds, kBoundS);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    loss.output = read_file(output);
    loss.ended = tasks_ended_on("ddx-host-a", loss.output);
    // Now SLURM is told, as an administrator would after a node failure: the step ends.
    RunResult down = cluster_->run({"/usr/bin/scontrol", "update", "nodename=ddx-host-b", "state=down", "reason=lost"}, {}, 60);
    EXPECT_EQ(down.exit_code, 0) << down.output;
    EXPECT_TRUE(job->wait(std::chrono::seconds(60)).has_value()) << "srun still running 60 s after the node was set DOWN\n"
                                                                 << read_file(output);
    return loss;
  }
};

// The ranks left end the job at the collective timeout with the watchdog's exit code, naming
// the silent ranks and their host; SLURM, which has not noticed the node, plays no part.
TEST_F(SlurmLostNode, ALostNodeEndsTheJobWithinTheTimeoutAndIsNamed) {
  const Loss loss = lose_the_second_host_during(
      joined({"/usr/bin/srun", "-N", "2", "--ntasks-per-node", "2"}, train("lost", {"--strategy", "ddp", "-m", "debug"}, 100000)),
      2);
  ASSERT_GE(loss.seconds, 0) << (loss.seconds == -2 ? "the job never reached step 5\n" : "host a's tasks still running 120 s after the loss\n")
                             << loss.output;
  EXPECT_LT(loss.seconds, kBoundS) << loss.output;
  const std::string watchdog = "Exited with exit code " + std::to_string(kExitWatchdog);
  EXPECT_EQ(loss.ended, (std::map<int, std::string>{{0, watchdog}, {1, watchdog}})) << loss.output;
  EXPECT_TRUE(has(loss.output, "ranks 2,3 (ddx-host-b) silent for ")) << loss.output;
  EXPECT_TRUE(has(loss.output, "their host may be down")) << loss.output;
}

// The same under one `ddx launch` per node (from srun): the surviving node's launcher does not
// wait for the lost one. Its workers' watchdogs name the silent host at the collective timeout
// and exit with the watchdog's code; the launcher reports that as the root cause and ends.
TEST_F(SlurmLostNode, ALostNodeEndsADdxLaunchJobOnTheOtherNode) {
  const Loss loss = lose_the_second_host_during(
      joined({"/usr/bin/srun", "-N", "2", "--ntasks-per-node", "1", DDX_BIN, "launch", "--nproc-per-node", "2", "--"},
             train("lost", {"--strategy", "ddp", "-m", "debug"}, 100000)),
      1);
  ASSERT_GE(loss.seconds, 0) << (loss.seconds == -2 ? "the job never reached step 5\n" : "host a's launcher still running 120 s after the loss\n")
                             << loss.output;
  EXPECT_LT(loss.seconds, kBoundS) << loss.output;
  EXPECT_EQ(loss.ended, (std::map<int, std::string>{{0, "Exited with exit code 1"}})) << loss.output;
  EXPECT_TRUE(has(loss.output, "ranks 2,3 (ddx-host-b) silent for ")) << loss.output;
  EXPECT_TRUE(has(loss.output, "ddx launch: worker group failed")) << loss.output;
  EXPECT_TRUE(std::regex_search(loss.output, std::regex("Root cause: rank [01] \\(local rank [01]\\) on ddx-host-a, pid [0-9]+: exit " +
                                                            std::to_string(kExitWatchdog) + "\n")))
      << loss.output;
  EXPECT_FALSE(has(loss.output, "ddx launch: received SIGTERM")) << loss.output;
}

// `ddx top` on a running srun job whose ranks srun dealt round-robin over the hosts: a NODE
// row per host, the rank rows grouped by host.
TEST_F(Slurm, TopShowsTheRanksOfAnSrunJobGroupedByHost) {
  const std::string output = dir_ + "/job.txt";
  auto job = cluster_->start(joined({"/usr/bin/srun", "-N", "2", "--ntasks-per-node", "2", "-m", "cyclic"},
                                    train("top", {"--strategy", "ddp", "-m", "debug"}, 100000)),
                             {}, output);
  for (int i = 0; i < 600 && !has(read_file(output), "step 20/"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(has(read_file(output), "step 20/")) << read_file(output);
  // job.json lands beside the metrics file (<dir>/top.jsonl here); every rank's heartbeat
  // (once a second) in within a few refreshes.
  RunResult top;
  for (int i = 0; i < 20 && !has(top.output, "\nddx-host-b  heartbeats "); ++i) {
    top = cluster_->run({DDX_BIN, "top", "--run", dir_, "--once"}, {}, 60);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // The job is ended as a user ends one: scancel, which stops every task on both hosts.
  RunResult cancel = cluster_->run({"/usr/bin/scancel", "--user", "root"}, {}, 60);
  EXPECT_EQ(cancel.exit_code, 0) << cancel.output;
  ASSERT_TRUE(job->wait(std::chrono::seconds(60)).has_value()) << read_file(output);
  EXPECT_EQ(top.exit_code, 0) << top.output;
  EXPECT_TRUE(has(top.output, "4 ranks")) << top.output;
  EXPECT_TRUE(has(top.output, "\nddx-host-a  proc ")) << top.output;
  EXPECT_TRUE(has(top.output, "\nddx-host-b  heartbeats ")) << top.output;
  // -m cyclic: ranks 0,2 on host a, 1,3 on host b; listed host by host.
  std::vector<std::string> hosts_in_order;
  std::istringstream lines(top.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 2 && std::isdigit(static_cast<unsigned char>(line[0])) && has(line, " ddx-host-")) {
      hosts_in_order.push_back(line.substr(0, line.find(' ')) + "@" + line.substr(line.find("ddx-host-"), 10));
    }
  }
  EXPECT_EQ(hosts_in_order, (std::vector<std::string>{"0@ddx-host-a", "2@ddx-host-a", "1@ddx-host-b", "3@ddx-host-b"}))
      << top.output;
}

// The harness itself: with a job still running, teardown leaves no daemon, step or task and
// removes both namespaces.
TEST(SlurmClusterTeardown, LeavesNoDaemonTaskOrNamespace) {
  const std::string dir = scratch_dir("slurm", "teardown");
  std::array<std::string, 2> names;
  std::vector<pid_t> pids;
  std::unique_ptr<ChildProcess> job;
  {
    SlurmCluster cluster(dir);
    DDX_SKIP_IF_REFUSED(cluster.refused());  // why: as in Slurm::SetUp
    ASSERT_TRUE(cluster.failed().empty()) << cluster.failed();
    names = cluster.hosts().namespaces();
    job = cluster.start({"/usr/bin/srun", "-N", "2", "sleep", "600"}, {}, dir + "/job.txt");
    for (int i = 0; i < 100 && cluster.tasks_left(std::chrono::milliseconds(0)).size() < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // Two sleeps and their slurmstepd, besides the daemons.
    ASSERT_GE(cluster.tasks_left(std::chrono::milliseconds(0)).size(), 4u) << read_file(dir + "/job.txt");
    pids = cluster.hosts().processes_left();
  }
  job.reset();
  EXPECT_TRUE(wait_until_dead(pids, std::chrono::seconds(5)));
  std::string namespaces;
  if (FILE* p = ::popen("/usr/sbin/ip netns list", "r")) {
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), p)) namespaces += buf.data();
    ::pclose(p);
  }
  for (const auto& n : names) EXPECT_FALSE(has(namespaces, n)) << namespaces;
}

}  // namespace
}  // namespace ddx::testing
