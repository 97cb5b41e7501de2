// `ddx launch` with real processes: failures are reported with their cause and nothing the job
// started survives it, whatever way it ends.
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include "launch_verdict.h"
#include "process_helpers.h"

namespace {

namespace fs = std::filesystem;
using ddx::testing::ChildProcess;
using ddx::testing::read_pids;
using ddx::testing::wait_until_dead;
using namespace std::chrono_literals;

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ddx-launch-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  void TearDown() override {
    // Whatever the test recorded is killed, pass or fail.
    for (const char* file : {"pids", "grandchildren"}) {
      for (pid_t pid : read_pids(path(file))) {
        if (ddx::testing::process_alive(pid)) ::kill(pid, SIGKILL);
      }
    }
    fs::remove_all(dir_);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // `ddx launch <launch_args> -- test_worker <worker_args>`.
  std::unique_ptr<ChildProcess> start(std::vector<std::string> launch_args,
                                      std::vector<std::string> worker_args,
                                      std::map<std::string, std::string> env = {},
                                      std::vector<std::string> env_removals = {}) {
    std::vector<std::string> argv = {DDX_BIN, "launch"};
    argv.insert(argv.end(), launch_args.begin(), launch_args.end());
    argv.push_back("--");
    argv.push_back(DDX_TEST_WORKER);
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    // The launcher's temporary directory lands here, removed in TearDown even when the
    // launcher is SIGKILLed and cannot remove it itself.
    env.emplace("TMPDIR", dir_.string());
    return std::make_unique<ChildProcess>(argv, env, path("output.txt"), env_removals);
  }

  // Runs to completion; returns the wait status and leaves the output in output_.
  int run(std::vector<std::string> launch_args, std::vector<std::string> worker_args,
          std::map<std::string, std::string> env = {},
          std::vector<std::string> env_removals = {}, std::chrono::milliseconds timeout = 30s) {
    auto launcher = start(launch_args, worker_args, env, env_removals);
    auto began = std::chrono::steady_clock::now();
    auto status = launcher->wait(timeout);
    elapsed_ = std::chrono::steady_clock::now() - began;
    output_ = launcher->output();
    EXPECT_TRUE(status.has_value()) << "ddx launch did not finish in time:\n" << output_;
    return status.value_or(-1);
  }

  bool wait_for_pid_count(size_t count, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (read_pids(path("pids")).size() < count) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

  void expect_output_has(const std::string& text) const {
    EXPECT_NE(output_.find(text), std::string::npos) << "missing \"" << text << "\" in:\n" << output_;
  }

  void expect_all_gone() const {
    std::vector<pid_t> pids = read_pids(path("pids"));
    std::vector<pid_t> grandchildren = read_pids(path("grandchildren"));
    pids.insert(pids.end(), grandchildren.begin(), grandchildren.end());
    EXPECT_FALSE(pids.empty());
    // The launcher waits for its workers before exiting, so they are gone already; a short
    // margin covers the kernel finishing the last SIGKILL.
    EXPECT_TRUE(wait_until_dead(pids, 2s)) << "processes survived the launcher";
  }

  static int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

  fs::path dir_;
  std::string output_;
  std::chrono::steady_clock::duration elapsed_{};
};

TEST_F(LaunchTest, SegfaultingRankIsReportedAndNothingSurvives) {
  int status = run({"-np", "4", "--grace-period", "2"},
                   {"--segv", "--only-rank", "2", "--fault-after", "0.5", "--pid-file", path("pids"),
                    "--spawn-grandchild", path("grandchildren")});
  EXPECT_EQ(exit_code(status), 1) << output_;
  // "Within seconds", not "after a timeout": generous, because symbolizing the crash on a
  // loaded 2-core CI machine can take several seconds.
  EXPECT_LT(elapsed_, 60s);
  expect_output_has("worker group failed");
  expect_output_has("Root cause: rank 2");
  expect_output_has("SIGSEGV");
  expect_output_has("crash_with_null_write");
  expect_output_has("ROOT CAUSE");
  expect_output_has("stopped by launcher");
  EXPECT_EQ(read_pids(path("pids")).size(), 4u);
  EXPECT_EQ(read_pids(path("grandchildren")).size(), 4u);
  expect_all_gone();
}

TEST_F(LaunchTest, UncaughtExceptionMessageIsShown) {
  int status = run({"-np", "4", "--grace-period", "2"},
                   {"--throw", "loss is NaN at step 17", "--only-rank", "1", "--fault-after", "0.5", "--pid-file", path("pids")});
  EXPECT_EQ(exit_code(status), 1) << output_;
  expect_output_has("Root cause: rank 1");
  expect_output_has("std::runtime_error: loss is NaN at step 17");
  expect_output_has("throw_uncaught");
  expect_output_has("SIGABRT");
  expect_all_gone();
}

TEST_F(LaunchTest, NonZeroExitIsReportedWithLastStderrLine) {
  int status = run({"-np", "4", "--grace-period", "2"},
                   {"--exit", "3", "--only-rank", "0", "--fault-after", "0.5", "--pid-file", path("pids")});
  EXPECT_EQ(exit_code(status), 1) << output_;
  expect_output_has("Root cause: rank 0");
  expect_output_has("exit 3");
  expect_output_has("test_worker: rank 0 exiting with code 3");
  expect_all_gone();
}

// Every rank fails the same way on its own (SIGTERM ignored, so the launcher's stop cannot end
// them first, whichever exits first): each is a failure in its own right, never "stopped by
// launcher", and the root cause is the lowest rank on every run, with the count.
TEST_F(LaunchTest, IdenticalFailuresNameTheLowestRankEveryRun) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    int status = run({"-np", "4", "--grace-period", "20"},
                     {"--exit", "3", "--fault-after", "0.5", "--ignore-sigterm", "--pid-file", path("pids")});
    EXPECT_EQ(exit_code(status), 1) << output_;
    expect_output_has("\nRoot cause: rank 0 (local rank 0) on ");
    expect_output_has("\n  4 ranks failed the same way: ranks 0,1,2,3\n");
    EXPECT_EQ(output_.find("stopped by launcher"), std::string::npos) << output_;
    EXPECT_EQ(output_.find("Also failed"), std::string::npos) << output_;
  }
  expect_all_gone();
}

TEST_F(LaunchTest, MaxRestartsRecoversFromAFirstAttemptFailure) {
  int status = run({"-np", "2", "--max-restarts", "2"}, {"--fail-first-attempt"});
  EXPECT_EQ(exit_code(status), 0) << output_;
  expect_output_has("restarting the worker group (restart 1 of 2)");
  expect_output_has("all workers succeeded on attempt 2");
}

TEST_F(LaunchTest, RestartsRunOutAndTheLastAttemptIsReported) {
  int status = run({"-np", "2", "--max-restarts", "1"}, {"--exit", "5"});
  EXPECT_EQ(exit_code(status), 1) << output_;
  expect_output_has("restart 1 of 1");
  expect_output_has("attempt 2 of 2");
}

TEST_F(LaunchTest, WorkersSeeTorchrunEnvironment) {
  int status = run({"-np", "3", "--run-id", "job42"}, {"--print-env"}, {}, {"OMP_NUM_THREADS"});
  ASSERT_EQ(exit_code(status), 0) << output_;
  expect_output_has("OMP_NUM_THREADS=1 for each worker");
  std::set<std::string> ports;
  for (int rank = 0; rank < 3; ++rank) {
    // Rank 0's stdout goes out as is (the job's report); the others' lines say their rank.
    std::string p = rank == 0 ? "\n" : "[rank " + std::to_string(rank) + "]: ";
    expect_output_has(p + "RANK=" + std::to_string(rank) + "\n");
    expect_output_has(p + "LOCAL_RANK=" + std::to_string(rank) + "\n");
    expect_output_has(p + "WORLD_SIZE=3\n");
    expect_output_has(p + "LOCAL_WORLD_SIZE=3\n");
    expect_output_has(p + "GROUP_RANK=0\n");
    expect_output_has(p + "MASTER_ADDR=127.0.0.1\n");
    expect_output_has(p + "TORCHELASTIC_RESTART_COUNT=0\n");
    expect_output_has(p + "TORCHELASTIC_RUN_ID=job42\n");
    expect_output_has(p + "DDX_LAUNCH=1\n");
    expect_output_has(p + "OMP_NUM_THREADS=1\n");
    std::smatch match;
    std::regex port_line(std::regex_replace(p, std::regex(R"([\[\]])"), R"(\$&)") + "MASTER_PORT=([0-9]+)");
    ASSERT_TRUE(std::regex_search(output_, match, port_line)) << output_;
    ports.insert(match[1].str());
    // Each rank has its own error file.
    expect_output_has("rank_" + std::to_string(rank) + "/error.json");
  }
  EXPECT_EQ(ports.size(), 1u) << "ranks disagree on MASTER_PORT";
  EXPECT_NE(*ports.begin(), "0");
  // The port the launcher picked stays bound: rank 0 inherits the listening socket for its
  // store, nobody else gets it.
  std::smatch fd;
  ASSERT_TRUE(std::regex_search(output_, fd, std::regex(R"(\nDDX_STORE_LISTEN_FD=[0-9]+ \(listening\))")))
      << output_;
  expect_output_has("[rank 1]: DDX_STORE_LISTEN_FD=<unset>\n");
  expect_output_has("[rank 2]: DDX_STORE_LISTEN_FD=<unset>\n");
}

TEST_F(LaunchTest, UserOmpNumThreadsIsKept) {
  int status = run({"--nproc-per-node", "2", "--master-port", "29633"}, {"--print-env"},
                   {{"OMP_NUM_THREADS", "7"}});
  ASSERT_EQ(exit_code(status), 0) << output_;
  expect_output_has("[rank 1]: OMP_NUM_THREADS=7\n");
  expect_output_has("\nMASTER_PORT=29633\n");
  expect_output_has("\nDDX_STORE_LISTEN_FD=<unset>\n");  // a given port is the workers' to bind
  EXPECT_EQ(output_.find("setting OMP_NUM_THREADS"), std::string::npos) << output_;
}

// Every console line says once which rank wrote it: rank 0's stdout (the job's report) as is,
// a line of ddx's logger with its own "[rank R/W host:pid]" and no second label in front,
// anything else with "[rank N]: ".
TEST_F(LaunchTest, EveryConsoleLineNamesItsRankOnce) {
  const std::string script =
      "echo \"report of rank $RANK\"; echo \"[rank $RANK/2 host:1] I 00:00:00.000 logged by rank $RANK\" >&2; "
      "echo \"plain stderr of rank $RANK\" >&2";
  ChildProcess ddx({DDX_BIN, "launch", "-np", "2", "--", "/bin/sh", "-c", script}, {{"TMPDIR", dir_.string()}},
                   path("output.txt"));
  auto status = ddx.wait(30s);
  output_ = ddx.output();
  ASSERT_TRUE(status.has_value()) << output_;
  EXPECT_EQ(exit_code(*status), 0) << output_;
  expect_output_has("\nreport of rank 0\n");
  expect_output_has("\n[rank 1]: report of rank 1\n");
  expect_output_has("\n[rank 0/2 host:1] I 00:00:00.000 logged by rank 0\n");
  expect_output_has("\n[rank 1/2 host:1] I 00:00:00.000 logged by rank 1\n");
  expect_output_has("\n[rank 0]: plain stderr of rank 0\n");
  expect_output_has("\n[rank 1]: plain stderr of rank 1\n");
  EXPECT_EQ(output_.find("]: [rank "), std::string::npos) << output_;
}

// ddx's own log lines from a real `ddx train` under ddx launch: "[rank 0/2 host:pid] I ... step 2"
// once, not behind the launcher's "[rank 0]: " as well; at debug level rank 1 logs too.
TEST_F(LaunchTest, TrainingLogLinesCarryOneRankLabel) {
  ChildProcess ddx({DDX_BIN, "launch", "-np", "2", "--", DDX_BIN, "train", "--strategy", "ddp", "-m", "debug", "-s", "32",
                    "-b", "2", "--max-steps", "2", "--log-freq", "1", "--no-progress", "--save-dir", path("out"),
                    "--metrics-file", path("metrics.jsonl")},
                   {{"TMPDIR", dir_.string()}, {"DDX_LOG_LEVEL", "debug"}}, path("output.txt"));
  auto status = ddx.wait(80s);
  output_ = ddx.output();
  ASSERT_TRUE(status.has_value()) << output_;
  EXPECT_EQ(exit_code(*status), 0) << output_;
  for (const std::string& label : {"\n[rank 0/2 ", "\n[rank 1/2 "}) expect_output_has(label);
  EXPECT_TRUE(std::regex_search(output_, std::regex(R"(\n\[rank 0/2 [^\]]+\] I [0-9:.]+ step 2)"))) << output_;
  EXPECT_EQ(output_.find("]: [rank "), std::string::npos) << output_;
}

// docs/bandwidth.md's first command, scaled to this machine: its stdout is nccl-tests' output as
// all_reduce_perf prints it, '#' lines and rows of numbers, so the scripts that split
// all_reduce_perf's rows on whitespace read it unchanged.
TEST_F(LaunchTest, ProbeBandwidthStdoutParsesAsNcclTestsOutput) {
  const std::string command = "exec '" + std::string(DDX_BIN) + "' launch --nproc-per-node 2 -- '" + DDX_BIN +
                              "' probe bandwidth -b 8 -e 64K -f 2 -n 2 2>'" + path("stderr.txt") + "'";
  ChildProcess ddx({"/bin/sh", "-c", command}, {{"TMPDIR", dir_.string()}}, path("stdout.txt"));
  auto status = ddx.wait(80s);
  output_ = ddx.output();
  const std::string errors = ddx::testing::read_file(path("stderr.txt"));
  ASSERT_TRUE(status.has_value()) << output_ << errors;
  ASSERT_EQ(exit_code(*status), 0) << output_ << errors;
  std::vector<long long> sizes;
  std::istringstream lines(output_);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::vector<std::string> fields{std::istream_iterator<std::string>(row), std::istream_iterator<std::string>()};
    ASSERT_GE(fields.size(), 13u) << "not a row of nccl-tests' table: " << line;
    ASSERT_TRUE(std::regex_match(fields[0], std::regex("[0-9]+"))) << "not a size: " << line;
    EXPECT_EQ(fields[2], "float") << line;
    EXPECT_EQ(fields[3], "sum") << line;
    EXPECT_TRUE(std::regex_match(fields[7], std::regex("[0-9.]+"))) << "out-of-place busbw: " << line;
    sizes.push_back(std::stoll(fields[0]));
  }
  std::vector<long long> expected;
  for (long long size = 8; size <= 64 * 1024; size *= 2) expected.push_back(size);
  EXPECT_EQ(sizes, expected) << output_;
  expect_output_has("\n# Avg bus bandwidth    : ");
}

TEST_F(LaunchTest, LogDirGetsPerRankFilesAndKeepsTheConsoleQuiet) {
  std::string logs = path("logs");
  int status = run({"-np", "2", "--log-dir", logs}, {"--exit", "4", "--only-rank", "1"});
  EXPECT_EQ(exit_code(status), 1) << output_;
  EXPECT_EQ(output_.find("[rank 1]: test_worker rank 1 started"), std::string::npos) << output_;
  EXPECT_NE(ddx::testing::read_file(logs + "/attempt_0/rank_1/stdout.log").find("test_worker rank 1 started"),
            std::string::npos);
  EXPECT_NE(ddx::testing::read_file(logs + "/attempt_0/rank_1/stderr.log").find("exiting with code 4"),
            std::string::npos);
  expect_output_has(logs + "/attempt_0/rank_1/stderr.log");
}

TEST_F(LaunchTest, SigkilledLauncherTakesWorkersWithIt) {
  auto launcher = start({"-np", "2"}, {"--sleep", "60", "--pid-file", path("pids")});
  ASSERT_TRUE(wait_for_pid_count(2, 15s)) << launcher->output();
  ::kill(launcher->pid(), SIGKILL);
  ASSERT_TRUE(launcher->wait(5s).has_value());
  // PR_SET_PDEATHSIG: the kernel kills the workers; nobody is left to clean up.
  EXPECT_TRUE(wait_until_dead(read_pids(path("pids")), 5s));
}

TEST_F(LaunchTest, SigtermToLauncherStopsWorkers) {
  auto launcher = start({"-np", "3", "--grace-period", "2"},
                        {"--sleep", "60", "--pid-file", path("pids"), "--spawn-grandchild",
                         path("grandchildren")});
  ASSERT_TRUE(wait_for_pid_count(3, 15s)) << launcher->output();
  ::kill(launcher->pid(), SIGTERM);
  auto status = launcher->wait(10s);
  output_ = launcher->output();
  ASSERT_TRUE(status.has_value()) << output_;
  EXPECT_EQ(exit_code(*status), 128 + SIGTERM) << output_;
  expect_output_has("received SIGTERM");
  expect_all_gone();
}

// --shm-size: the workers see a tmpfs of that size on /dev/shm; this process's /dev/shm is another.
TEST_F(LaunchTest, ShmSizeGivesTheWorkersAPrivateDevShm) {
  DDX_SKIP_IF_REFUSED(ddx::testing::mount_namespace_refused());  // reason: --shm-size needs a private mount namespace (root); see process_helpers.h
  ChildProcess ddx({DDX_BIN, "launch", "--shm-size", "2m", "--", "/bin/df", "-k", "/dev/shm"}, {}, path("output.txt"));
  auto status = ddx.wait(30s);
  ASSERT_TRUE(status.has_value());
  const std::string out = ddx.output();
  EXPECT_EQ(exit_code(*status), 0) << out;
  EXPECT_NE(out.find("ddx launch: the workers' /dev/shm is a private tmpfs of 2m"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\nddx-shm +2048 )"))) << out;
  ChildProcess here({"/bin/df", "-k", "/dev/shm"}, {}, path("here.txt"));
  ASSERT_TRUE(here.wait(10s).has_value());
  EXPECT_EQ(here.output().find("ddx-shm"), std::string::npos) << here.output();
}

TEST_F(LaunchTest, BadFlagsExitTwoWithOneLine) {
  struct Case {
    std::vector<std::string> argv;
    std::string mention;
  };
  std::vector<Case> cases = {
      {{"launch", "-np", "0", "--", "/bin/true"}, "--nproc-per-node"},
      {{"launch", "--nproc-per-node", "two", "--", "/bin/true"}, "--nproc-per-node"},
      {{"launch", "--nnodes", "2", "--node-rank", "2", "--master-port", "29500", "--", "/bin/true"}, "--node-rank"},
      {{"launch", "--master-port", "70000", "--", "/bin/true"}, "--master-port"},
      {{"launch", "--nnodes", "2", "--node-rank", "0", "--", "/bin/true"}, "--master-port"},
      {{"launch", "-np", "2"}, "no command"},
      {{"launch", "--", "/no/such/program"}, "not found"},
      {{"launch", "--", "no-such-program-in-path-xyz"}, "not found"},
      {{"launch", "--bogus-flag", "--", "/bin/true"}, "bogus"},
      {{"launch", "--nnodes", "2", "--node-rank", "0", "--master-port", "65535", "--max-restarts", "1", "--", "/bin/true"},
       "--master-port 65535 + --max-restarts 1 is past port 65535"},
      // Parsed before any mount: never handed to the kernel as text (a comma would add mount options).
      {{"launch", "--shm-size", "abc", "--", "/bin/true"}, "--shm-size 'abc' is not a byte count"},
      {{"launch", "--shm-size", "1X", "--", "/bin/true"}, "--shm-size '1X' is not a byte count"},
      {{"launch", "--shm-size", "-1", "--", "/bin/true"}, "--shm-size"},
      {{"launch", "--shm-size", "64m,uid=0", "--", "/bin/true"}, "--shm-size '64m,uid=0' is not a byte count"},
      {{"launch", "--shm-size", "0", "--", "/bin/true"}, "--shm-size 0 must be above 0"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {DDX_BIN};
    argv.insert(argv.end(), c.argv.begin(), c.argv.end());
    ChildProcess ddx(argv, {}, path("output.txt"));
    auto status = ddx.wait(10s);
    ASSERT_TRUE(status.has_value());
    std::string out = ddx.output();
    EXPECT_EQ(exit_code(*status), 2) << c.mention << ": " << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(c.mention), std::string::npos) << out;
  }
}

// A job that ran to a verdict (a probe naming a slow rank) is not a failed one: the ranks exit
// with it one after another (here a second apart, as ranks shutting down do), and the launcher
// waits for them instead of stopping them at the first exit, then reports the verdict and its
// code, with no root cause; the job's events record the verdict, not a failed attempt.
TEST_F(LaunchTest, AVerdictIsReportedAsTheJobsAnswerNotAsACrash) {
  const std::string verdict = "compute: 3 ranks x 1 metric, 7 trials: SLOW: rank 1 (vm, local rank 1): fp32 0.087 TFLOP/s";
  int status = run({"-np", "3"}, {"--verdict", "3", verdict, "--stagger", "1", "--pid-file", path("pids")},
                   {{"DDX_EVENTS_FILE", path("events.jsonl")}});
  EXPECT_EQ(exit_code(status), 3) << output_;
  ddx::testing::expect_launch_reported_verdict(output_, 3, 3, verdict + "\n");
  expect_output_has("the job reported a verdict (exit 3, attempt 1 of 1): ");
  const std::string events = ddx::testing::read_file(path("events.jsonl"));
  EXPECT_NE(events.find("\"event\":\"launch.verdict\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"exit_code\":3"), std::string::npos) << events;
  EXPECT_EQ(events.find("launch.attempt_failed"), std::string::npos) << events;
  expect_all_gone();
}

// A verdict is final: asking again would get the same answer, so no restart.
TEST_F(LaunchTest, AVerdictIsNotRestarted) {
  int status = run({"-np", "2", "--max-restarts", "2"}, {"--verdict", "1", "doctor: 15 checks: 1 FAIL"});
  EXPECT_EQ(exit_code(status), 1) << output_;
  ddx::testing::expect_launch_reported_verdict(output_, 2, 1, "doctor: 15 checks: 1 FAIL\n");
  expect_output_has("(exit 1, attempt 1 of 3)");
  EXPECT_EQ(output_.find("restarting"), std::string::npos) << output_;
}

// A --log-dir used again: the earlier run's verdict in attempt_0/rank_N/error.json must not be
// read as this run's answer when this run's workers fail without writing one.
TEST_F(LaunchTest, AnEarlierRunsVerdictInTheSameLogDirIsNotThisRunsAnswer) {
  const std::string logs = path("logs");
  const int first = run({"-np", "2", "--log-dir", logs}, {"--verdict", "1", "compute: SLOW: rank 1 (earlier run)"});
  EXPECT_EQ(exit_code(first), 1) << output_;
  ddx::testing::expect_launch_reported_verdict(output_, 2, 1, "compute: SLOW: rank 1 (earlier run)\n");
  ChildProcess ddx({DDX_BIN, "launch", "-np", "2", "--log-dir", logs, "--", "/bin/sh", "-c", "echo plain failure >&2; exit 1"},
                   {{"TMPDIR", dir_.string()}}, path("output2.txt"));
  const auto status = ddx.wait(60s);
  output_ = ddx.output();
  ASSERT_TRUE(status.has_value()) << output_;
  EXPECT_EQ(exit_code(*status), 1) << output_;
  expect_output_has("ddx launch: worker group failed (attempt 1 of 1)");
  EXPECT_EQ(output_.find("the job reported a verdict"), std::string::npos) << output_;
  EXPECT_EQ(output_.find("earlier run"), std::string::npos) << output_;
  EXPECT_EQ(output_.find(" verdict\n"), std::string::npos) << output_;
}

// A rank that crashes while the others report a verdict is the root cause, whoever exited first:
// the verdict ranks are marked as such, never blamed.
TEST_F(LaunchTest, ACrashBesideAVerdictIsTheRootCause) {
  const std::string script = "if [ \"$RANK\" = 1 ]; then exec '" + std::string(DDX_TEST_WORKER) +
                             "' --segv --fault-after 1; else exec '" + DDX_TEST_WORKER +
                             "' --verdict 1 'selfcheck: 1 FAILED'; fi";
  ChildProcess ddx({DDX_BIN, "launch", "-np", "3", "--", "/bin/sh", "-c", script}, {{"TMPDIR", dir_.string()}},
                   path("output.txt"));
  auto status = ddx.wait(60s);
  output_ = ddx.output();
  ASSERT_TRUE(status.has_value()) << output_;
  EXPECT_EQ(exit_code(*status), 1) << output_;
  expect_output_has("ddx launch: worker group failed (attempt 1 of 1)");
  expect_output_has("\nRoot cause: rank 1 (local rank 1) on ");
  EXPECT_TRUE(std::regex_search(output_, std::regex(R"(\n  1 +1 +\S+ +[0-9]+ +SIGSEGV \(signal 11\) +ROOT CAUSE\n)"))) << output_;
  for (const char* rank : {"0", "2"}) {
    EXPECT_TRUE(std::regex_search(output_, std::regex(std::string("\n  ") + rank + " +" + rank + R"( +\S+ +[0-9]+ +exit 1 +verdict\n)")))
        << output_;
  }
  EXPECT_EQ(output_.find("the job reported a verdict"), std::string::npos) << output_;
}

}  // namespace
