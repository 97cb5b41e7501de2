// What a newcomer sees for a mistyped command line, checked line for line: every message names
// the culprit, suggests the nearest valid spelling where there is one, points to the
// subcommand's own --help and exits 2 before anything runs; and the help texts show the
// defaults and the real names of things.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

struct Case {
  std::vector<std::string> args;
  std::string line;  // the whole output: exactly this one line
};

void PrintTo(const Case& c, std::ostream* os) {
  for (const auto& a : c.args) *os << a << " ";
}

class UsageError : public ::testing::TestWithParam<Case> {};

TEST_P(UsageError, ExitsTwoWithExactlyThisLine) {
  const std::string dir = scratch_dir("usage", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::vector<std::string> argv{DDX_BIN};
  argv.insert(argv.end(), GetParam().args.begin(), GetParam().args.end());
  RunResult r = run_in(dir, argv, {}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, GetParam().line + "\n");
}

INSTANTIATE_TEST_SUITE_P(
    CommandLines, UsageError,
    ::testing::Values(
        // Unknown flags: named, nearest spelling, the subcommand's own --help (issue 19, item 3).
        Case{{"launch", "--max-restart", "1", "-np", "1", "--", "true"},
             "ddx: error: unknown flag --max-restart; did you mean --max-restarts? (see ddx launch --help)"},
        Case{{"launch", "--bogus", "-np", "1", "--", "true"}, "ddx: error: unknown flag --bogus (see ddx launch --help)"},
        Case{{"train", "--max-step", "2"}, "ddx: error: unknown flag --max-step; did you mean --max-steps? (see ddx train --help)"},
        Case{{"train", "--zero-1"}, "ddx: error: unknown flag --zero-1; did you mean --zero1? (see ddx train --help)"},
        Case{{"probe", "bandwidth", "--minbusbw", "3"},
             "ddx: error: unknown flag --minbusbw; did you mean --min-busbw? (see ddx probe bandwidth --help)"},
        Case{{"launch", "-np", "2", "ls", "-la"},
             "ddx: error: unknown flag -la; to pass it to the command, put '--' before the command: "
             "ddx launch -np 2 -- ls -la (see ddx launch --help)"},
        // Unknown subcommands (item 4).
        Case{{"trian"},
             "ddx: error: unknown subcommand 'trian'; did you mean 'train'? Subcommands: launch, version, analyze, "
             "train, parity, compare, checkpoint, doctor, validate, top, health, probe, fault (see ddx --help)"},
        Case{{"probe", "bandwith"},
             "ddx: error: unknown subcommand 'bandwith'; did you mean 'bandwidth'? Subcommands: selfcheck, hang, "
             "bandwidth, buserror, compute, memory, gpu-health (see ddx probe --help)"},
        Case{{"probe"}, "ddx: error: ddx probe needs a subcommand: selfcheck, hang, bandwidth, buserror, compute, memory, "
                        "gpu-health (see ddx probe --help)"},
        Case{{"fault"}, "ddx: error: ddx fault needs a subcommand: matrix (see ddx fault --help)"},
        // A bad value names the flag, the value and what the flag takes, for every command (issue 44,
        // item 14: not CLI11's "Value abc not in range 0 to 1099511627776").
        Case{{"launch", "--nproc-per-node", "two", "--", "true"},
             "ddx: error: --nproc-per-node 'two' is not a whole number (see ddx launch --help)"},
        Case{{"train", "--max-steps", "abc"},
             "ddx: error: --max-steps 'abc' is not a whole number from 0 to 1099511627776 (see ddx train --help)"},
        Case{{"train", "--lr", "fast"}, "ddx: error: --lr 'fast' is not a number from 0 to 10 (see ddx train --help)"},
        Case{{"parity", "--world-sizes", "2,x"},
             "ddx: error: --world-sizes '2,x' is not a whole number from 1 to 1024 (see ddx parity --help)"},
        Case{{"parity", "--dtype", "fp16"},
             "ddx: error: --dtype 'fp16' is not one of: fp32, bf16, fp64 (see ddx parity --help)"},
        // Values of the bandwidth probe's lists are listed (item 5).
        Case{{"probe", "bandwidth", "-o", "mean"},
             "ddx: error: -o/--op 'mean' is not one of: sum, prod, max, min, avg, all"},
        Case{{"probe", "bandwidth", "-d", "float33"},
             "ddx: error: -d/--datatype 'float33' is not one of: int8, uint8, int32, uint32, int64, uint64, half, "
             "float, double, bfloat16, all (did you mean float?)"},
        Case{{"probe", "bandwidth", "--op-list", "allgathr"},
             "ddx: error: --op-list 'allgathr' is not one of: all_reduce, all_gather, reduce_scatter, broadcast, "
             "reduce, alltoall, sendrecv, all (did you mean all_gather?)"},
        // Strategy-specific flags under a strategy that ignores them (item 6).
        Case{{"train", "--zero1"}, "ddx: error: --zero1 applies to --strategy ddp, not single"},
        Case{{"train", "--zero1", "--strategy", "fsdp"}, "ddx: error: --zero1 applies to --strategy ddp, not fsdp"},
        Case{{"train", "--bucket-cap-mb", "1"}, "ddx: error: --bucket-cap-mb applies to --strategy ddp, not single"},
        Case{{"train", "--verify-init", "--strategy", "fsdp"},
             "ddx: error: --verify-init applies to --strategy ddp, not fsdp"},
        Case{{"train", "--no-reshard-after-forward", "--strategy", "ddp"},
             "ddx: error: --no-reshard-after-forward applies to --strategy fsdp or 2d or pp, not ddp"},
        Case{{"train", "--prefetch", "1", "--strategy", "ddp"},
             "ddx: error: --prefetch applies to --strategy fsdp or 2d or pp, not ddp"},
        // 2d tunes its FSDP with FSDP's flags; with --dp-replicate there is no FSDP to tune.
        Case{{"train", "--strategy", "2d", "--tp", "2", "--dp-replicate", "--prefetch", "2"},
             "ddx: error: --prefetch tunes FSDP, but --strategy 2d --dp-replicate replicates the TP slices with DDP"},
        Case{{"train", "--strategy", "2d", "--tp", "2", "--dp-replicate", "--no-reshard-after-forward"},
             "ddx: error: --no-reshard-after-forward tunes FSDP, but --strategy 2d --dp-replicate replicates the TP "
             "slices with DDP"},
        Case{{"train", "--strategy", "2d", "--tp", "2", "--dp-replicate", "--mp-param-dtype", "bf16"},
             "ddx: error: --mp-param-dtype tunes FSDP, but --strategy 2d --dp-replicate replicates the TP slices "
             "with DDP"},
        Case{{"train", "--strategy", "2d", "--tp", "2", "--zero1"},
             "ddx: error: --zero1 applies to --strategy ddp, not 2d"},
        Case{{"train", "--sequence-parallel", "--strategy", "ddp"},
             "ddx: error: --sequence-parallel applies to --strategy tp or 2d, not ddp"},
        Case{{"train", "--zero1", "--strategy", "bogus"},
             "ddx: error: --strategy bogus is not one of: 2d, ddp, fsdp, pp, single, tp"},
        // A missing checkpoint folder (item 10).
        Case{{"checkpoint", "consolidate", "/no/such/step_000000500", "-o", "x"},
             "ddx: error: checkpoint /no/such/step_000000500 does not exist"}));

RunResult help(std::vector<std::string> args) {
  std::vector<std::string> argv{DDX_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--help");
  RunResult r = run_in(scratch_dir("usage", "help"), argv, {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r;
}

// Help shows the folder names checkpoints really have (item 10).
// ddx train reads DDX_COLLECTIVE_TIMEOUT when --collective-timeout is not given (docs/hangs.md):
// a malformed value is one line naming the variable, exit 2, and no run folder.
TEST(EnvironmentError, ABadCollectiveTimeoutVariableStopsDdxTrainInOneLine) {
  const std::string dir = scratch_dir("usage", "collective-timeout-env");
  RunResult r = run_in(dir, {DDX_BIN, "train", "-m", "debug", "--max-steps", "1", "--no-progress", "--save-dir", dir + "/out"},
                       {{"DDX_COLLECTIVE_TIMEOUT", "bogus"}}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ddx: error: DDX_COLLECTIVE_TIMEOUT='bogus' is not a duration"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out"));
}

// DDX_EVENTS_FILE (ddx/watchdog/job_events.h) in a folder that does not exist: one line naming the
// variable, exit 2, and no run folder, before the command starts.
TEST(EnvironmentError, AnEventsFileThatCannotBeWrittenStopsTheCommandInOneLine) {
  const std::string dir = scratch_dir("usage", "events-file-env");
  const std::string bad = dir + "/missing/events.jsonl";
  RunResult r = run_in(dir, {DDX_BIN, "train", "-m", "debug", "--max-steps", "1", "--no-progress", "--save-dir", dir + "/out"},
                       {{"DDX_EVENTS_FILE", bad}}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ddx: error: DDX_EVENTS_FILE=" + bad + " cannot be written: No such file or directory"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out"));
  EXPECT_FALSE(std::filesystem::exists(bad));
}

TEST(Help, ConsolidateShowsARealCheckpointFolderName) {
  RunResult r = help({"checkpoint", "consolidate"});
  EXPECT_NE(r.output.find("outputs/run1/checkpoints/step_000000500"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step_500 "), std::string::npos) << r.output;
}

// Every option of selfcheck shows its default, like the other commands (item 13).
TEST(Help, SelfcheckShowsItsDefaults) {
  RunResult r = help({"probe", "selfcheck"});
  for (const char* shown : {"=1,7,1000,65537 ", "=float32,float64,bfloat16,int32,int64 ", "=60\n", "=auto\n"}) {
    EXPECT_NE(r.output.find(shown), std::string::npos) << shown << "\n" << r.output;
  }
}

// The hang variables are read once, at the start, and only where nothing overrides them (issue
// 44, item 10): a trace folder no dump could be written to is one line naming it, before the run
// starts; a variable a flag overrides is not read, so a bad value there stops nothing; the hang
// probe, which sets its own timeout and trace folder, checks the variables it does read before
// any rank starts, instead of reporting a cluster that did not dump.
TEST(EnvironmentError, HangVariablesAreCheckedOnceAtTheStartAndOnlyWhereRead) {
  const std::string dir = scratch_dir("usage", "hang-variables");
  auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {DDX_BIN, "train", "-m", "debug", "-s", "32", "--max-steps", "1", "--no-progress",
                                     "--save-dir", dir + "/out"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  auto one_line_starting = [](const RunResult& r, const std::string& start) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(r.output.rfind(start, 0), 0u) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  };
  one_line_starting(run_in(dir, train({}), {{"DDX_TRACE_DIR", "/proc/nope"}}, 60),
                    "ddx: error: DDX_TRACE_DIR /proc/nope cannot be written: /proc does not take new files (");
  one_line_starting(run_in(dir, train({"--trace-dir", "/proc/nope"}), {}, 60),
                    "ddx: error: --trace-dir /proc/nope cannot be written: /proc does not take new files (");
  EXPECT_FALSE(std::filesystem::exists(dir + "/out"));
  // The flags win, so the variables are not read.
  RunResult overridden = run_in(dir, train({"--collective-timeout", "10", "--trace-dir", dir + "/traces"}),
                                {{"DDX_COLLECTIVE_TIMEOUT", "abc"}, {"DDX_TRACE_DIR", "/proc/nope"}}, 120);
  EXPECT_EQ(overridden.exit_code, 0) << overridden.output;

  const std::vector<std::string> probe = {DDX_BIN, "probe", "hang", "--scenario", "healthy", "-np", "2", "--timeout",
                                          "2s", "--quiet", "--trace-dir", dir + "/probe"};
  RunResult bad_format = run_in(dir, probe, {{"DDX_FR_FORMAT", "pickle"}}, 60);
  EXPECT_EQ(bad_format.exit_code, 2) << bad_format.output;
  EXPECT_EQ(bad_format.output, "ddx: error: DDX_FR_FORMAT='pickle' is not one of ddx, pytorch, both\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/probe"));
  // --timeout and --trace-dir are the probe's own: the variables they stand for are not read.
  RunResult probed = run_in(dir, probe, {{"DDX_COLLECTIVE_TIMEOUT", "abc"}, {"DDX_TRACE_DIR", "/proc/nope"}}, 120);
  EXPECT_EQ(probed.exit_code, 0) << probed.output;
  EXPECT_NE(probed.output.find("ddx probe hang: PASS (healthy)"), std::string::npos) << probed.output;
}

// Every output path is checked before the work it would keep (issue 44, item 7, as a new user
// met it after the first fix): a path that cannot be written is one line naming the flag, exit 2,
// before a training step, a doctor check, a collective or a validate stage runs; and nothing is
// left behind (no run folder, no flight-recorder dump of an "uncaught exception").
TEST(UsageError, EveryOutputPathIsCheckedBeforeTheWork) {
  const std::string dir = scratch_dir("usage", "output-paths");
  const std::vector<std::string> train = {DDX_BIN, "train", "-m", "debug", "-s", "32", "--max-steps", "1",
                                          "--no-progress", "--save-dir", dir + "/out"};
  struct Case {
    std::vector<std::string> extra;
    std::string flag;
  };
  const std::vector<Case> train_cases = {
      {{"--final-weights", "/proc/nope/w.safetensors"}, "--final-weights"},
      {{"--plot-file", "/proc/nope/p.svg"}, "--plot-file"},
      {{"--grads-file", "/proc/nope/g.safetensors"}, "--grads-file"},
      {{"--metrics-file", "/proc/nope/m.jsonl"}, "--metrics-file"},
      {{"--profile", "/proc/nope/p.json"}, "--profile"},
  };
  auto one_line = [](const RunResult& r, const std::string& flag) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(r.output.rfind("ddx: error: " + flag + " /proc/nope", 0), 0u) << r.output;
    EXPECT_NE(r.output.find("cannot be written"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  };
  for (const Case& c : train_cases) {
    std::vector<std::string> argv = train;
    argv.insert(argv.end(), c.extra.begin(), c.extra.end());
    one_line(run_in(dir, argv, {}, 60), c.flag);
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/out")) << "a refused run wrote into --save-dir";
  EXPECT_FALSE(std::filesystem::exists(dir + "/outputs")) << "a refused run left a run folder";
  one_line(run_in(dir, {DDX_BIN, "doctor", "--json", "/proc/nope/d.json"}, {}, 60), "--json");
  one_line(run_in(dir, {DDX_BIN, "probe", "selfcheck", "--json", "/proc/nope/s.json"}, {}, 60), "--json");
  one_line(run_in(dir, {DDX_BIN, "validate", "--np", "2", "--out", dir + "/report", "--junit", "/proc/nope/v.xml"}, {},
                  60),
           "--junit");
  EXPECT_FALSE(std::filesystem::exists(dir + "/report")) << "validate ran a stage";
  one_line(run_in(dir, {DDX_BIN, "checkpoint", "consolidate", dir + "/no-such-step", "-o", "/proc/nope/model"}, {}, 60),
           "-o/--out");
}

}  // namespace
}  // namespace ddx::testing
