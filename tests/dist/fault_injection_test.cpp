// Injected faults in real processes (ddx train and ddx probe under ddx launch, Gloo over
// loopback): each fault happens for real, the launcher and the logs name the faulted rank and
// step, a faulted process says so on its first log line and in its reports, nothing is left
// behind, and bad specs are one-line usage errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

struct Job {
  std::string dir;
  RunResult result;
  std::vector<nlohmann::json> metrics;
};

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// `ddx train` on the debug model (under `ddx launch -np ranks` when ranks > 0); "{dir}" in an
// extra argument is the job's scratch folder.
Job train(const std::string& tag, int ranks, std::vector<std::string> extra, std::map<std::string, std::string> env = {},
          int timeout_s = 180) {
  Job job;
  job.dir = scratch_dir("faults", tag);
  std::vector<std::string> argv;
  if (ranks > 0) argv = {DDX_BIN, "launch", "--nproc-per-node", std::to_string(ranks), "--"};
  std::vector<std::string> base = {DDX_BIN, "train", "--save-dir", job.dir + "/out", "--metrics-file",
                                   job.dir + "/metrics.jsonl", "--log-freq", "1", "--no-progress", "--seed", "7",
                                   "-s", "32", "--lr", "3e-3"};
  if (std::find(extra.begin(), extra.end(), "--collective-timeout") == extra.end()) {
    base.insert(base.end(), {"--collective-timeout", "20"});
  }
  if (std::find(extra.begin(), extra.end(), "-m") == extra.end()) base.insert(base.end(), {"-m", "debug"});
  argv.insert(argv.end(), base.begin(), base.end());
  for (std::string& arg : extra) {
    if (arg.rfind("{dir}", 0) == 0) arg = job.dir + arg.substr(5);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  job.result = run_in(job.dir, argv, std::move(env), timeout_s);
  job.metrics = read_metrics(job.dir + "/metrics.jsonl");
  EXPECT_TRUE(processes_left(job.dir).empty()) << "processes left behind by " << tag;
  return job;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// --- never silent ---

TEST(Faults, FaultedTrainSaysSoOnItsFirstLineAndInEveryMetricsRecord) {
  Job job = train("announce", 0, {"--max-steps", "2", "--fault", "straggler@factor=1"});
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_NE(first_line(job.result.output).find("injected faults and test switches are set; results of this process "
                                               "are not clean: --fault straggler@factor=1"),
            std::string::npos)
      << job.result.output;
  ASSERT_EQ(job.metrics.size(), 2u);
  for (const auto& record : job.metrics) {
    EXPECT_EQ(record.at("injected_faults"), nlohmann::json::array({"--fault straggler@factor=1"})) << record.dump();
  }
}

TEST(Faults, CleanTrainHasNoFaultLineAndNoFaultKey) {
  Job job = train("clean", 0, {"--max-steps", "1"});
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_EQ(job.result.output.find("injected faults"), std::string::npos) << job.result.output;
  ASSERT_EQ(job.metrics.size(), 1u);
  EXPECT_FALSE(job.metrics[0].contains("injected_faults")) << job.metrics[0].dump();
}

TEST(Faults, LauncherNamesFaultsOnItsStartLine) {
  Job job = train("launcher-line", 2, {"--max-steps", "1", "--fault", "slow-link@rank=1,ms=1"},
                  {{"DDX_FAULT", "straggler@rank=0,factor=1"}});
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_NE(job.result.output.find("ddx launch: starting 2 workers"), std::string::npos) << job.result.output;
  EXPECT_NE(job.result.output.find("; injected faults: DDX_FAULT=straggler@rank=0,factor=1; --fault "
                                   "slow-link@rank=1,ms=1\n"),
            std::string::npos)
      << job.result.output;
}

// --- bad input: one line, exit 2, the valid kinds listed ---

TEST(Faults, BadSpecsAreUsageErrors) {
  Job unknown = train("bad-kind", 0, {"--max-steps", "2", "--fault", "explode@rank=0"});
  EXPECT_EQ(unknown.result.exit_code, 2) << unknown.result.output;
  EXPECT_EQ(unknown.result.output.rfind("ddx: error: --fault 'explode@rank=0': unknown fault kind 'explode' (valid "
                                        "kinds: kill, segfault, abort, exit, oom, hang,",
                                        0),
            0u)
      << unknown.result.output;
  EXPECT_EQ(unknown.result.output.find('\n'), unknown.result.output.size() - 1) << unknown.result.output;

  Job rank = train("bad-rank", 2, {"--max-steps", "2", "--fault", "kill@rank=2,step=1"});
  EXPECT_NE(rank.result.exit_code, 0) << rank.result.output;
  EXPECT_NE(rank.result.output.find("ddx: error: --fault 'kill@rank=2,step=1': rank 2 is outside the world of 2 "
                                    "rank(s) (valid kinds: kill,"),
            std::string::npos)
      << rank.result.output;
  EXPECT_NE(rank.result.output.find("exit 2"), std::string::npos) << rank.result.output;

  Job step = train("bad-step", 0, {"--max-steps", "3", "--fault", "kill@rank=0,step=4"});
  EXPECT_EQ(step.result.exit_code, 2) << step.result.output;
  EXPECT_NE(step.result.output.find("ddx: error: --fault 'kill@rank=0,step=4': step 4 is past the run's last step 3"),
            std::string::npos)
      << step.result.output;

  // The retired switches are refused, not ignored in silence.
  Job retired = train("retired", 0, {"--max-steps", "1"}, {{"DDX_TEST_BREAK", "uneven-tokens"}});
  EXPECT_EQ(retired.result.exit_code, 2) << retired.result.output;
  EXPECT_NE(retired.result.output.find("ddx: error: DDX_TEST_BREAK is no longer read: set DDX_FAULT="),
            std::string::npos)
      << retired.result.output;
  // uneven-tokens is a training option now, not a fault kind.
  Job uneven = train("uneven-kind", 0, {"--max-steps", "1"}, {{"DDX_FAULT", "uneven-tokens"}});
  EXPECT_EQ(uneven.result.exit_code, 2) << uneven.result.output;
  EXPECT_NE(uneven.result.output.find("unknown fault kind 'uneven-tokens'"), std::string::npos) << uneven.result.output;
}

// --- process faults: the launcher's root cause names the rank, the log names the step ---

struct ProcessFault {
  std::string spec;
  std::string ending;  // how the launcher's root-cause line says the rank ended
  std::string error;   // the error report's first line ("" where the rank can write none: SIGKILL, exit)
};

void PrintTo(const ProcessFault& f, std::ostream* os) { *os << f.spec; }

class ProcessFaults : public ::testing::TestWithParam<ProcessFault> {};

TEST_P(ProcessFaults, LauncherNamesTheRankAndNothingIsLeft) {
  const ProcessFault& f = GetParam();
  std::string tag = f.spec.substr(0, f.spec.find('@'));
  Job job = train("process-" + tag, 2, {"--max-steps", "4", "--fault", f.spec});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  // The root cause is rank 1, ended the way the fault ends a process, not merely mentioned.
  const std::string cause = "Root cause: rank 1 (local rank 1) on ";
  const size_t at = job.result.output.find(cause);
  ASSERT_NE(at, std::string::npos) << job.result.output;
  const std::string line = job.result.output.substr(at, job.result.output.find('\n', at) - at);
  EXPECT_EQ(line.substr(line.rfind(": ") + 2), f.ending) << line;
  if (!f.error.empty()) {
    // The rank's own report made it out: its error and a stack through the fault's code
    // (for oom, in spite of the exhausted address space).
    EXPECT_NE(job.result.output.find("  error:  " + f.error, at), std::string::npos) << job.result.output;
    EXPECT_NE(job.result.output.find("faults/kinds/" + tag + ".cpp:", at), std::string::npos) << job.result.output;
  }
  EXPECT_NE(job.result.output.find("fault " + f.spec + " fires on rank 1 at step 3"), std::string::npos)
      << job.result.output;
  // Steps 1 and 2 completed before the fault.
  ASSERT_GE(job.metrics.size(), 2u) << job.result.output;
  EXPECT_LE(job.metrics.size(), 2u) << job.result.output;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, ProcessFaults,
    ::testing::Values(ProcessFault{"kill@rank=1,step=3", "SIGKILL (signal 9)", ""},
                      ProcessFault{"segfault@rank=1,step=3", "SIGSEGV (signal 11)",
                                   "Signal 11 (SIGSEGV) received by PID "},
                      ProcessFault{"abort@rank=1,step=3", "SIGABRT (signal 6)",
                                   "std::runtime_error: injected fault abort@rank=1,step=3 at step 3"},
                      ProcessFault{"exit@rank=1,step=3,code=7", "exit 7", ""},
                      ProcessFault{"oom@rank=1,step=3,mib=64", "SIGABRT (signal 6)", "std::bad_alloc: std::bad_alloc"}),
    [](const auto& info) { return info.param.spec.substr(0, info.param.spec.find('@')); });

// --- communication and compute faults ---

TEST(Faults, HungRankIsNamedBehindByTheWatchdog) {
  Job job = train("hang", 2, {"--max-steps", "4", "--collective-timeout", "3", "--fault", "hang@rank=1,step=3"});
  EXPECT_NE(job.result.exit_code, 0) << job.result.output;
  EXPECT_NE(job.result.output.find("fault hang@rank=1,step=3 fires on rank 1 at step 3"), std::string::npos)
      << job.result.output;
  EXPECT_NE(job.result.output.find("ddx watchdog: all_reduce"), std::string::npos) << job.result.output;
  // The watchdog's line names rank 1 as the one behind (not merely mentions both words). Rank 0's
  // all_reduce is still in flight: the watchdog notices before Gloo's own, later timeout.
  const std::regex behind(R"(ddx watchdog: group world: rank 0 at #(\d+) \(in flight\); rank 1 at #(\d+) \(done[^)]*\) <- behind)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(job.result.output, m, behind)) << job.result.output;
  EXPECT_EQ(std::stoi(m[2]) + 1, std::stoi(m[1])) << m[0];  // rank 1 finished the collective before rank 0's
}

TEST(Faults, StragglerIsNamedByTheWarning) {
  // Factor 5 over half-second windows for both runs, as the fault matrix: the planted 10x
  // straggler is far past it, and 40 steps of it last well over half a second on any CPU.
  const std::vector<std::string> watch = {"--strategy", "ddp", "--max-steps", "40", "--straggler-factor", "5",
                                          "--straggler-window", "0.5"};
  std::vector<std::string> slowed = watch;
  slowed.insert(slowed.end(), {"--fault", "straggler@rank=1,factor=10"});
  Job job = train("straggler", 2, slowed);
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_NE(job.result.output.find("straggler: rank 1 was "), std::string::npos) << job.result.output;
  EXPECT_NE(job.result.output.find(" ms busy per step over the last "), std::string::npos) << job.result.output;
  // Without the fault, no warning.
  Job clean = train("no-straggler", 2, watch);
  ASSERT_EQ(clean.result.exit_code, 0) << clean.result.output;
  EXPECT_EQ(clean.result.output.find("straggler:"), std::string::npos) << clean.result.output;
}

// --- detectors ---

TEST(Faults, NanCheckNamesTheRankStepAndParameterAndStops) {
  Job job = train("nan-stop", 2, {"--strategy", "ddp", "--max-steps", "4", "--nan-check", "--fault", "nan@rank=1,step=2"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("nan-check: step 2: non-finite gradient first on rank 1, parameter "),
            std::string::npos)
      << job.result.output;
  EXPECT_NE(job.result.output.find("(non-finite on rank 1); stopping (--on-nan stop)"), std::string::npos)
      << job.result.output;
  // Step 1 finished; step 2's update never happened.
  EXPECT_EQ(job.metrics.size(), 1u) << job.result.output;
}

TEST(Faults, NanCheckSkipKeepsTheWeightsFinite) {
  Job job = train("nan-skip", 2,
                  {"--strategy", "ddp", "--max-steps", "4", "--nan-check", "--on-nan", "skip", "--fault", "nan@rank=0,step=2"});
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_NE(job.result.output.find("nan-check: step 2: non-finite gradient first on rank 0"), std::string::npos)
      << job.result.output;
  ASSERT_EQ(job.metrics.size(), 4u);
  EXPECT_TRUE(job.metrics[1].value("update_skipped", false)) << job.metrics[1].dump();
  for (const auto& r : job.metrics) EXPECT_TRUE(r.at("loss").is_number()) << r.dump();
  EXPECT_TRUE(std::isfinite(job.metrics[3].at("loss").get<double>())) << job.metrics[3].dump();
  // The same fault without the check poisons the weights: the loss after it is not finite.
  Job unchecked = train("nan-unchecked", 2, {"--strategy", "ddp", "--max-steps", "4", "--fault", "nan@rank=0,step=2"});
  ASSERT_EQ(unchecked.metrics.size(), 4u) << unchecked.result.output;
  EXPECT_FALSE(unchecked.metrics[3].at("loss").is_number() &&
               std::isfinite(unchecked.metrics[3].at("loss").get<double>()))
      << unchecked.metrics[3].dump();
}

TEST(Faults, ReplicaCheckNamesTheBitflippedReplica) {
  Job job = train("bitflip", 3, {"--strategy", "ddp", "--max-steps", "6", "--replica-check-freq", "2", "--fault",
                                 "bitflip@rank=2,step=3"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("fault bitflip@rank=2,step=3 fires on rank 2 at step 3: flipping bit 22 of "),
            std::string::npos)
      << job.result.output;
  EXPECT_NE(job.result.output.find("replica-check: step 4: data-parallel replica on rank 2 diverges from the other 2 "
                                   "in parameter "),
            std::string::npos)
      << job.result.output;
  EXPECT_EQ(job.metrics.size(), 3u) << job.result.output;  // stopped at step 4, before its record
}

TEST(Faults, ReplicaCheckNamesACorruptedAllReduce) {
  Job job = train("corrupt-allreduce", 3, {"--strategy", "ddp", "--max-steps", "4", "--replica-check-freq", "1",
                                           "--fault", "corrupt-collective@rank=1,step=2"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("replica-check: step 2: data-parallel replica on rank 1 diverges from the other 2"),
            std::string::npos)
      << job.result.output;
  // Unchecked until its last step, the same run trains on with one replica silently different:
  // steps 2 and 3 pass, and a check after step 4 still finds rank 1 apart (the corruption stuck).
  Job unchecked = train("corrupt-unchecked", 3, {"--strategy", "ddp", "--max-steps", "4", "--replica-check-freq", "4",
                                                 "--fault", "corrupt-collective@rank=1,step=2"});
  EXPECT_EQ(unchecked.result.exit_code, 1) << unchecked.result.output;
  EXPECT_EQ(unchecked.metrics.size(), 3u) << unchecked.result.output;  // steps 1-3 logged as if healthy
  EXPECT_NE(unchecked.result.output.find("replica-check: step 4: data-parallel replica on rank 1 diverges from the other 2"),
            std::string::npos)
      << unchecked.result.output;
}

TEST(Faults, DetectorsRefuseAStrategyTheyCannotSee) {
  Job job = train("fsdp-nan", 0, {"--strategy", "fsdp", "--max-steps", "1", "--nan-check"});
  EXPECT_EQ(job.result.exit_code, 2) << job.result.output;
  EXPECT_NE(job.result.output.find("ddx: error: --nan-check: --strategy fsdp does not expose its local parameters"),
            std::string::npos)
      << job.result.output;
}

// --- storage: a bad newest checkpoint never costs the valid one before it ---

// Runs 10 steps with checkpoints every 5 and `fault`, then the same run again without it.
std::pair<Job, Job> checkpoint_then_resume(const std::string& tag, const std::string& fault) {
  Job faulted = train(tag, 0, {"--max-steps", "10", "--ckpt-freq", "5", "-e", "run", "--fault", fault});
  // The second run reuses the first one's folder: same experiment, no fault.
  Job resumed;
  resumed.dir = faulted.dir;
  resumed.result = run_in(faulted.dir + "/out",
                          {DDX_BIN, "train", "--save-dir", faulted.dir + "/out", "--metrics-file",
                           faulted.dir + "/resumed.jsonl", "--log-freq", "1", "--no-progress", "--seed", "7", "-m",
                           "debug", "-s", "32", "--lr", "3e-3", "--max-steps", "10", "--ckpt-freq", "5", "-e", "run"},
                          {}, 180);
  resumed.metrics = read_metrics(faulted.dir + "/resumed.jsonl");
  return {faulted, resumed};
}

TEST(Faults, CorruptCheckpointFallsBackToThePreviousOne) {
  auto [faulted, resumed] = checkpoint_then_resume("ckpt-corrupt", "ckpt-corrupt@step=10");
  ASSERT_EQ(faulted.result.exit_code, 0) << faulted.result.output;
  EXPECT_NE(faulted.result.output.find("fault ckpt-corrupt@step=10 fires on rank 0 at step 10: inverting a byte of "),
            std::string::npos)
      << faulted.result.output;
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("checkpoints/step_000000010 is corrupt: "), std::string::npos)
      << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("; falling back to the previous checkpoint"), std::string::npos)
      << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("checkpoints/step_000000005 at step 5"), std::string::npos) << resumed.result.output;
  EXPECT_EQ(resumed.metrics.back().at("step"), 10);
}

TEST(Faults, TornCheckpointIsNeverResumedFrom) {
  auto [faulted, resumed] = checkpoint_then_resume("ckpt-torn", "ckpt-torn@step=10");
  EXPECT_EQ(faulted.result.exit_code, -1) << faulted.result.output;  // SIGKILL
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("checkpoints/step_000000005 at step 5"), std::string::npos) << resumed.result.output;
}

TEST(Faults, DiskFullStopsTheRunAndKeepsTheLastCheckpoint) {
  auto [faulted, resumed] = checkpoint_then_resume("disk-full", "disk-full@step=10");
  EXPECT_NE(faulted.result.exit_code, 0) << faulted.result.output;
  EXPECT_NE(faulted.result.output.find("No space left on device"), std::string::npos) << faulted.result.output;
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("checkpoints/step_000000005 at step 5"), std::string::npos) << resumed.result.output;
}

// --- recovery ---

std::vector<double> curve(const std::vector<nlohmann::json>& records) {
  std::vector<double> out;
  for (const auto& r : records) out.push_back(r.at("loss").get<double>());
  return out;
}

TEST(Faults, RestartResumesBitIdentically) {
  const std::vector<std::string> run = {"--strategy", "ddp", "--max-steps", "16", "--ckpt-freq", "5", "-e", "run"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = run;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  Job clean = train("restart-clean", 2, with({"--final-weights", "{dir}/final.safetensors"}));
  ASSERT_EQ(clean.result.exit_code, 0) << clean.result.output;
  // The launcher restarts the group once; the fault fires on the first attempt only.
  Job faulted;
  faulted.dir = scratch_dir("faults", "restart-faulted");
  std::vector<std::string> argv = {DDX_BIN, "launch", "--nproc-per-node", "2", "--max-restarts", "1", "--",
                                   DDX_BIN, "train", "--save-dir", faulted.dir + "/out", "--metrics-file",
                                   faulted.dir + "/metrics.jsonl", "--log-freq", "1", "--no-progress", "--seed", "7",
                                   "-m", "debug", "-s", "32", "--lr", "3e-3", "--final-weights", faulted.dir + "/final.safetensors",
                                   "--fault", "kill@rank=1,step=13"};
  argv.insert(argv.end(), run.begin(), run.end());
  faulted.result = run_in(faulted.dir, argv, {}, 240);
  faulted.metrics = read_metrics(faulted.dir + "/metrics.jsonl");
  EXPECT_TRUE(processes_left(faulted.dir).empty());
  ASSERT_EQ(faulted.result.exit_code, 0) << faulted.result.output;
  EXPECT_NE(faulted.result.output.find("attempt 1 failed: rank 1 SIGKILL"), std::string::npos) << faulted.result.output;
  EXPECT_NE(faulted.result.output.find("resuming from "), std::string::npos) << faulted.result.output;
  EXPECT_EQ(curve(faulted.metrics), curve(clean.metrics));  // exactly, every step
  EXPECT_EQ(read_file(faulted.dir + "/final.safetensors"), read_file(clean.dir + "/final.safetensors"));
}

TEST(Faults, AFaultOnEveryAttemptEndsAfterTheRestarts) {
  Job job;
  job.dir = scratch_dir("faults", "restart-loop");
  job.result = run_in(job.dir,
                      {DDX_BIN, "launch", "--nproc-per-node", "2", "--max-restarts", "2", "--", DDX_BIN, "train",
                       "--save-dir", job.dir + "/out", "--no-progress", "-m", "debug", "-s", "32", "--max-steps", "3",
                       "--fault", "exit@rank=0,step=2,attempt=all"},
                      {}, 240);
  EXPECT_TRUE(processes_left(job.dir).empty());
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("attempt 2 failed: rank 0 exit 1"), std::string::npos) << job.result.output;
  EXPECT_NE(job.result.output.find("Root cause: rank 0"), std::string::npos) << job.result.output;
  EXPECT_EQ(job.result.output.find("attempt 4"), std::string::npos) << job.result.output;
}

TEST(Faults, UnevenTokensIsATrainingOption) {
  Job plain = train("even", 0, {"--max-steps", "2", "-b", "4"});
  Job uneven = train("uneven", 0, {"--max-steps", "2", "-b", "4", "--uneven-tokens"});
  ASSERT_EQ(plain.result.exit_code, 0) << plain.result.output;
  ASSERT_EQ(uneven.result.exit_code, 0) << uneven.result.output;
  ASSERT_EQ(plain.metrics.size(), 2u);
  ASSERT_EQ(uneven.metrics.size(), 2u);
  EXPECT_NE(plain.metrics[0].at("loss"), uneven.metrics[0].at("loss"));
  EXPECT_FALSE(uneven.metrics[0].contains("injected_faults"));  // an option, not a fault
}

// --- faults that desync the ranks: the watchdog stops the job, the dumps name the culprit ---

// `ddx analyze` on a job's flight-recorder dumps ({dir}/traces).
RunResult analyze(const Job& job) { return run_in(job.dir, {DDX_BIN, "analyze", job.dir + "/traces"}, {}, 60); }

TEST(Faults, SkippedCollectiveIsNamedByTheAnalyzer) {
  Job job = train("skip", 3, {"--strategy", "ddp", "--max-steps", "4", "--collective-timeout", "5", "--trace-dir",
                              "{dir}/traces", "--fault", "skip-collective@rank=1,step=3"});
  EXPECT_NE(job.result.exit_code, 0) << job.result.output;
  EXPECT_NE(job.result.output.find("fault skip-collective@rank=1,step=3 fires on rank 1 at step 3: leaving out all_reduce"),
            std::string::npos)
      << job.result.output;
  // Gloo pairs rank 1's next all-reduce (a gradient bucket) with the others' skipped one (the token
  // count): the size check fails, and the dumps show rank 1 alone out of step at that sequence number.
  RunResult verdict = analyze(job);
  EXPECT_NE(verdict.output.find("VERDICT: dtype-mismatch: rank 1 called all_reduce(sum) float32 ["), std::string::npos)
      << verdict.output << job.result.output;
  EXPECT_NE(verdict.output.find("where the others called all_reduce(sum) int64 [1] [culprit: rank 1 "), std::string::npos)
      << verdict.output;
}

TEST(Faults, MismatchIsNamedByTheCollectiveCheck) {
  Job job = train("mismatch-checked", 3, {"--strategy", "ddp", "--max-steps", "4", "--check-collectives", "--fault",
                                          "mismatch@rank=1,step=3"});
  EXPECT_NE(job.result.exit_code, 0) << job.result.output;
  EXPECT_NE(job.result.output.find("fault mismatch@rank=1,step=3 fires on rank 1 at step 3: launching all_reduce one "
                                   "element short"),
            std::string::npos)
      << job.result.output;
  // The step's first all-reduce is the token count, one element: rank 1 sends none.
  EXPECT_NE(job.result.output.find(": rank 1 called all_reduce(sum) int64 [0], but ranks 0,2 called all_reduce(sum) "
                                   "int64 [1] (majority 2 of 3)"),
            std::string::npos)
      << job.result.output;
}

TEST(Faults, MismatchWithoutTheCheckIsNamedByTheAnalyzer) {
  Job job = train("mismatch", 3, {"--strategy", "ddp", "--max-steps", "4", "--collective-timeout", "5", "--trace-dir",
                                  "{dir}/traces", "--fault", "mismatch@rank=1,step=3"});
  EXPECT_NE(job.result.exit_code, 0) << job.result.output;
  RunResult verdict = analyze(job);
  // One verdict line: the kind, the rank and the shapes that differ, and rank 1 as culprit.
  const std::regex line(R"(VERDICT: size-mismatch: rank 1 called all_reduce\(sum\) int64 \[0\] as #\d+ on group world where the )"
                        R"(others called all_reduce\(sum\) int64 \[1\] \[culprit: rank 1 )");
  EXPECT_TRUE(std::regex_search(verdict.output, line)) << verdict.output << job.result.output;
}

// --- the rendezvous store goes away ---

// Every line of `output` that contains all of `parts`.
std::vector<std::string> lines_with(const std::string& output, const std::vector<std::string>& parts) {
  std::vector<std::string> found;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return line.find(p) != std::string::npos; })) {
      found.push_back(line);
    }
  }
  return found;
}

TEST(Faults, LostStoreIsNamedInOneLineByEveryRank) {
  Job job = train("store-loss", 3, {"--strategy", "ddp", "--max-steps", "200", "--fault", "store-loss@rank=0,step=3"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_EQ(lines_with(job.result.output, {"fault store-loss@rank=0,step=3 fires on rank 0 at step 3: closed the ",
                                           " connections of the rendezvous store at 127.0.0.1:"})
                .size(),
            1u)
      << job.result.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(lines_with(job.result.output, {"[rank " + std::to_string(rank) + "/3 ",
                                             " E ", "ddx watchdog: the rendezvous store at 127.0.0.1:",
                                             " (hosted by rank 0) is unreachable since ",
                                             " (the store closed the connection)"})
                  .size(),
              1u)
        << "rank " << rank << " did not say it once\n" << job.result.output;
  }
  // The launcher's table names the store and its host; c10d's own messages never reach the console.
  EXPECT_EQ(lines_with(job.result.output, {"  error:  ddx watchdog: the rendezvous store at 127.0.0.1:",
                                           " (hosted by rank 0) is unreachable since "})
                .size(),
            1u)
      << job.result.output;
  EXPECT_EQ(job.result.output.find("Exception raised from"), std::string::npos) << job.result.output;
  EXPECT_EQ(job.result.output.find("frame #"), std::string::npos) << job.result.output;
  EXPECT_LT(job.metrics.size(), 200u) << "the run went on to the end";
}

// --check-collectives exchanges fingerprints through the store before every collective: losing
// the store fails that collective with the store's line, not with a peer "never reached" it.
TEST(Faults, LostStoreUnderTheCollectiveCheckBlamesTheStoreNotAPeer) {
  Job job = train("store-loss-fp", 2,
                  {"--strategy", "ddp", "--max-steps", "200", "--check-collectives", "--fault", "store-loss@rank=0,step=3"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("  error:  "), std::string::npos) << job.result.output;
  EXPECT_FALSE(lines_with(job.result.output, {"  error:  ", "the rendezvous store at 127.0.0.1:",
                                              " (hosted by rank 0) is unreachable since "})
                   .empty())
      << job.result.output;
  EXPECT_EQ(job.result.output.find("never reached this collective"), std::string::npos) << job.result.output;
  EXPECT_EQ(job.result.output.find("frame #"), std::string::npos) << job.result.output;
}

// torchrun's agent keeps one store for every attempt; the restarted workers must not meet the
// failed attempt's keys there, and must come back bit-identical to a run without the fault.
TEST(Faults, TorchrunRestartResumesBitIdentically) {
  const std::string torchrun = std::filesystem::path(DDX_PYTHON).parent_path() / "torchrun";
  DDX_SKIP_IF_REFUSED(::access(torchrun.c_str(), X_OK) == 0 ? "" : "no " + torchrun);  // reason: torchrun comes with the torch of DDX_PYTHON's environment, which this build was configured without
  const std::vector<std::string> run = {"--strategy", "ddp", "--max-steps", "16", "--ckpt-freq", "5", "-e", "run"};
  std::vector<std::string> clean_args = run;
  clean_args.insert(clean_args.end(), {"--final-weights", "{dir}/final.safetensors"});
  Job clean = train("torchrun-clean", 2, clean_args);
  ASSERT_EQ(clean.result.exit_code, 0) << clean.result.output;
  Job faulted;
  faulted.dir = scratch_dir("faults", "torchrun-restart");
  std::vector<std::string> argv = {torchrun, "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                                   "--no-python", DDX_BIN, "train", "--save-dir", faulted.dir + "/out", "--metrics-file",
                                   faulted.dir + "/metrics.jsonl", "--log-freq", "1", "--no-progress", "--seed", "7",
                                   "-m", "debug", "-s", "32", "--lr", "3e-3", "--collective-timeout", "20",
                                   "--final-weights", faulted.dir + "/final.safetensors", "--fault", "kill@rank=1,step=13"};
  argv.insert(argv.end(), run.begin(), run.end());
  faulted.result = run_in(faulted.dir, argv, {}, 200);
  faulted.metrics = read_metrics(faulted.dir + "/metrics.jsonl");
  EXPECT_TRUE(processes_left(faulted.dir).empty());
  ASSERT_EQ(faulted.result.exit_code, 0) << faulted.result.output;
  EXPECT_NE(faulted.result.output.find("resuming from " + faulted.dir + "/out/run/checkpoints/step_000000010 at step 10"),
            std::string::npos)
      << faulted.result.output;
  EXPECT_EQ(curve(faulted.metrics), curve(clean.metrics));  // exactly, every step
  EXPECT_EQ(read_file(faulted.dir + "/final.safetensors"), read_file(clean.dir + "/final.safetensors"));
}

// --- memory: a full /dev/shm is named, not a bare SIGBUS ---

TEST(Faults, FullSharedMemoryIsNamedInsteadOfABareBusError) {
  DDX_SKIP_IF_REFUSED(mount_namespace_refused());  // reason: the tiny /dev/shm needs a private mount namespace (root); see process_helpers.h
  // A 4 MiB tmpfs on /dev/shm in a namespace of this job only: the host's /dev/shm is never touched.
  const std::string dir = scratch_dir("faults", "shm-full");
  const std::string script = "mount -t tmpfs -o size=4m tmpfs /dev/shm && exec '" + std::string(DDX_BIN) +
                             "' launch --nproc-per-node 2 -- '" + DDX_BIN + "' train --save-dir '" + dir +
                             "/out' --no-progress -m debug -s 32 --max-steps 4 --fault shm-full@rank=1,step=3";
  RunResult r = run_in(dir, {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script}, {}, 120);
  EXPECT_TRUE(processes_left(dir).empty());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("Root cause: rank 1 (local rank 1)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SIGBUS (signal 7)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a file on a tmpfs (/dev/shm) with 0.0 of 4.0 MiB free: shared memory is exhausted"),
            std::string::npos)
      << r.output;
}

// --- the replica check on sharded strategies ---

TEST(Faults, ReplicaCheckNamesABitflipInATensorParallelSlice) {
  Job job = train("tp-bitflip", 2, {"--strategy", "tp", "--tp", "2", "-m", "debug-tp", "--max-steps", "5", "--replica-check-freq", "1",
                                    "--fault", "bitflip@rank=1,step=2,param=blocks.0.mlp.c_fc.weight"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("replica-check: step 3: rank 1's own storage of parameter blocks.0.mlp.c_fc.weight (no "
                                   "other rank holds a copy) changed after the update of step 2 wrote it; stopping"),
            std::string::npos)
      << job.result.output;
}

TEST(Faults, ReplicaCheckNamesACorruptedTensorParallelAllReduce) {
  Job job = train("tp-corrupt", 4, {"--strategy", "tp", "--tp", "4", "-m", "debug-tp", "--max-steps", "4", "--replica-check-freq", "1",
                                    "--fault", "corrupt-collective@rank=2,step=2"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("replica-check: step 2: tensor-parallel replica on rank 2 diverges from the other 3 in "
                                   "parameter "),
            std::string::npos)
      << job.result.output;
  Job clean = train("tp-clean", 4, {"--strategy", "tp", "--tp", "4", "-m", "debug-tp", "--max-steps", "4", "--replica-check-freq", "1"});
  EXPECT_EQ(clean.result.exit_code, 0) << clean.result.output;
  EXPECT_EQ(clean.result.output.find("replica-check"), std::string::npos) << clean.result.output;
}

TEST(Faults, ReplicaCheckNamesABitflipInAnFsdpShard) {
  Job job = train("fsdp-bitflip", 3, {"--strategy", "fsdp", "--max-steps", "5", "--replica-check-freq", "1", "--fault",
                                      "bitflip@rank=2,step=2,param=blocks.1.attn.c_attn.weight"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("replica-check: step 3: rank 2's own storage of parameter blocks.1.attn.c_attn.weight"),
            std::string::npos)
      << job.result.output;
  Job clean = train("fsdp-clean", 3, {"--strategy", "fsdp", "--max-steps", "4", "--replica-check-freq", "1"});
  EXPECT_EQ(clean.result.exit_code, 0) << clean.result.output;
  EXPECT_EQ(clean.result.output.find("replica-check"), std::string::npos) << clean.result.output;
}

TEST(Faults, ReplicaCheckNamesACorruptedFsdpAllGather) {
  Job job = train("fsdp-corrupt", 3, {"--strategy", "fsdp", "--max-steps", "4", "--replica-check-freq", "1", "--fault",
                                      "corrupt-collective@rank=1,step=2,op=all_gather"});
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  // The first exchange of step 2 (the seal's, before the update) already goes through rank 1's corrupt
  // all-gather: its rows fail their own checksums there, and rank 1 names itself.
  EXPECT_NE(job.result.output.find("Root cause: rank 1 (local rank 1)"), std::string::npos) << job.result.output;
  EXPECT_NE(job.result.output.find("the detectors' own all-gather on rank 1 delivered a corrupt row from rank 0: this "
                                   "rank's collectives return corrupt results"),
            std::string::npos)
      << job.result.output;
}

}  // namespace
}  // namespace ddx::testing
