// `ddx analyze` on the flight-recorder dumps of real PyTorch jobs: 4 Gloo ranks under torchrun
// (2 and 3 for the skipped rest of a step), tests/python/fr_job.py, PyTorch's recorder on
// (TORCH_FR_BUFFER_SIZE), one planted fault per job. The verdict must name the planted rank and the kind of fault. PyTorch's own reader,
// torchfrtrace, runs on the same files: it crashes on Gloo's dumps and on JSON ones (the gap ddx
// fills: docs/analyze-pytorch.md), and that crash is expected by name, so that a torchfrtrace
// that starts reading them fails here; what it then says must not contradict ddx (its culprits
// and its missing ranks).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
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

// What a test changes in the job beyond its fault: more environment for fr_job.py, torchrun's
// monitor interval, and a tag for its folder.
struct JobTweaks {
  std::string tag;
  std::map<std::string, std::string> env;
  std::string monitor_interval = "10";
};

// One torchrun job of fr_job.py with `fault` planted on rank `culprit` of `ranks` at `step`.
// torchrun's monitor looks at its workers every 10 s, so the surviving ranks have reached the
// failed collective before it tears the job down after a rank dies; a rank it stops still writes
// its dump first (fr_job.py; as NCCL's watchdog dumps before the job is killed).
Job run_job(const std::string& fault, const std::string& format = "pickle", int ranks = 4, int culprit = 2,
            int step = 2, const JobTweaks& tweaks = {}) {
  Job job;
  job.dir = scratch_dir("pytorch-fr", fault + "-" + format + (ranks == 4 ? "" : "-np" + std::to_string(ranks)) +
                                          (step == 2 ? "" : "-step" + std::to_string(step)) +
                                          (tweaks.tag.empty() ? "" : "-" + tweaks.tag));
  job.traces = job.dir + "/traces";
  std::filesystem::create_directories(job.traces);
  std::map<std::string, std::string> env = {{"TORCH_FR_BUFFER_SIZE", "2000"},
                                            {"TORCH_FR_DUMP_TEMP_FILE", job.traces + "/nccl_trace_rank_"},
                                            {"FR_FAULT", fault},
                                            {"FR_CULPRIT", std::to_string(culprit)},
                                            {"FR_STEP", std::to_string(step)},
                                            {"FR_FORMAT", format},
                                            {"OMP_NUM_THREADS", "1"}};
  for (const auto& [key, value] : tweaks.env) env[key] = value;
  job.torchrun = run_in(job.dir,
                        // --standalone: a free port of its own (the default 29500 collides
                        // with the job ctest runs beside this one).
                        {kBin + "/torchrun", "--standalone", "--nproc-per-node", std::to_string(ranks),
                         "--monitor-interval", tweaks.monitor_interval,
                         std::string(DDX_SOURCE_DIR) + "/tests/python/fr_job.py"},
                        env, 150);
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

// torchfrtrace on the same dumps: its output, and whether it crashed (a Python traceback).
struct TheirReading {
  bool crashed = false;
  std::string output;
};

TheirReading torchfrtrace(const Job& job) {
  RunResult r = run_in(job.dir,
                       {kBin + "/torchfrtrace", "--allow-incomplete-ranks", "-p", "nccl_trace_rank_", job.traces},
                       {}, 120);
  return {r.exit_code != 0 || r.output.find("Traceback (most recent call last)") != std::string::npos, r.output};
}

// How torchfrtrace (torch 2.11) crashes on these dumps (docs/analyze-pytorch.md): on Gloo's
// pickles at the group's key (their pg_config is keyed '', their entries name group '0'), on
// PyTorch's JSON dumps at the file name (it reads pickles only, named <prefix><rank>).
const std::string kCrashOnGloo = "KeyError: ('0', 0)";
const std::string kCrashOnJson = "ValueError: invalid literal for int() with base 10: '";  // '<rank>.json'; os.walk's order

// The ranks in torchfrtrace's "Culprit rank R" and "missing ranks: {R, ...}" lines.
std::set<int> ranks_torchfrtrace_names(const std::string& output) {
  std::set<int> named;
  const std::regex culprit(R"(Culprit rank ([0-9]+))"), missing(R"(missing ranks: \{([0-9, ]*)\})"), number("[0-9]+");
  for (std::sregex_iterator it(output.begin(), output.end(), culprit), end; it != end; ++it) {
    named.insert(std::stoi((*it)[1].str()));
  }
  for (std::sregex_iterator it(output.begin(), output.end(), missing), end; it != end; ++it) {
    const std::string list = (*it)[1].str();
    for (std::sregex_iterator r(list.begin(), list.end(), number); r != end; ++r) {
      named.insert(std::stoi(r->str()));
    }
  }
  return named;
}

// torchfrtrace on a job's dumps must crash the way it does today (`expected_crash`): a
// torchfrtrace that starts reading them fails this, and what it then says is checked against
// ddx: it names someone, and only ranks that the fault or ddx names (`named`), as culprits and
// as missing ranks alike.
void expect_torchfrtrace_crash_or_agreement(const Job& job, const std::string& expected_crash,
                                            const std::set<int>& named) {
  const TheirReading theirs = torchfrtrace(job);
  if (theirs.crashed) {
    EXPECT_NE(theirs.output.find(expected_crash), std::string::npos)
        << "torchfrtrace crashed another way than \"" << expected_crash << "\":\n" << theirs.output;
    return;
  }
  ADD_FAILURE() << "torchfrtrace no longer crashes on these dumps (\"" << expected_crash
                << "\" expected): its reading is checked against ddx's below; update docs/analyze-pytorch.md "
                   "and this test\n"
                << theirs.output;
  const std::set<int> theirs_named = ranks_torchfrtrace_names(theirs.output);
  EXPECT_FALSE(theirs_named.empty()) << "torchfrtrace names no rank:\n" << theirs.output;
  for (int r : theirs_named) EXPECT_EQ(named.count(r), 1u) << "torchfrtrace blames rank " << r << ":\n" << theirs.output;
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
    EXPECT_NE(a.text.find("rank " + std::to_string(c.culprits.front()) + "'s stack at "), std::string::npos) << a.text;
    EXPECT_NE(a.text.find("fr_job.py:"), std::string::npos) << a.text;
  }
  // PyTorch's own reader on the same files: it crashes on Gloo's dumps; if it ever reads them, it
  // must not blame a rank that neither the fault (rank 2) nor ddx names.
  std::set<int> named(c.culprits.begin(), c.culprits.end());
  named.insert(2);
  expect_torchfrtrace_crash_or_agreement(job, kCrashOnGloo, named);
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
                      Case{"subgroup", "never-joined", {2}, "rank 2 never joined all_reduce #3 on group 2"},
                      // Rank 2 leaves out a send; rank 3 waits in its recv. Gloo's recorder has
                      // no entry for either, so the dumps show rank 3 missing from the next
                      // all_reduce: ddx names it, and says the wait may be a recv whose sender
                      // is at fault.
                      Case{"p2p", "never-joined", {3},
                           "rank 3 may be waiting in a recv whose sender never sent"}),
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
  // torchfrtrace reads pickles only: on the JSON dumps it stops at the first file name; if it
  // ever reads them, it must name rank 2 and no other.
  expect_torchfrtrace_crash_or_agreement(json, kCrashOnJson, {2});
}

// Issue 46: under load, torchrun stopped the job (a rank had died) before the surviving ranks had
// written their dumps, and the verdict lost a rank. Here it stops them while they are writing
// them: a monitor interval of 1 s, and dumps slowed to 3 s each (FR_DUMP_DELAY_S, a loaded
// machine). Each survivor finishes its dump on torchrun's SIGTERM before it exits, so all three
// are there, and the verdict is the kill's.
TEST(PytorchJobs, TorchrunStoppingTheJobDoesNotCutTheSurvivorsDumps) {
  ASSERT_EQ(::access((kBin + "/torchrun").c_str(), X_OK), 0) << "no torchrun beside " << DDX_PYTHON;
  Job job = run_job("kill", "pickle", 4, 2, 2, {"slow-dump", {{"FR_DUMP_DELAY_S", "3"}}, "1"});
  EXPECT_NE(job.torchrun.output.find("closing signal SIGTERM"), std::string::npos)
      << "torchrun did not stop the survivors while they dumped:\n" << job.torchrun.output;
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(std::filesystem::exists(job.traces + "/nccl_trace_rank_" + std::to_string(r)))
        << "rank " << r << " left no dump:\n" << job.torchrun.output;
  }
  EXPECT_FALSE(std::filesystem::exists(job.traces + "/nccl_trace_rank_2"));
  Analysis a = analyze(job);
  ASSERT_EQ(a.exit_code, 1) << a.text << "\n--- the job:\n" << job.torchrun.output;
  ASSERT_TRUE(a.report.is_object()) << a.text;
  EXPECT_EQ(a.report.at("dumps").at("usable").size(), 3u) << a.text;
  EXPECT_EQ(a.report.at("verdict").at("kind"), "no-dump") << a.text;
  EXPECT_EQ(a.report.at("verdict").at("culprits"), nlohmann::json::array({2})) << a.text;
}

// A rank's two dumpers (its main thread when the collective fails, its deadline thread for a rank
// stuck elsewhere) meet: the collective times out at 4 s, the dump takes 3 s (FR_DUMP_DELAY_S),
// and the deadline comes at 5 s, in the middle of it. The second waits for the first's dump
// instead of exiting under it, so every rank's dump is whole and rank 2, stuck in compute, is named.
TEST(PytorchJobs, TheDeadlineDoesNotCutADumpUnderWay) {
  ASSERT_EQ(::access((kBin + "/torchrun").c_str(), X_OK), 0) << "no torchrun beside " << DDX_PYTHON;
  Job job = run_job("compute", "pickle", 4, 2, 2, {"deadline", {{"FR_DUMP_DELAY_S", "3"}, {"FR_DEADLINE_S", "5"}}});
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(std::filesystem::exists(job.traces + "/nccl_trace_rank_" + std::to_string(r)))
        << "rank " << r << " left no dump:\n" << job.torchrun.output;
  }
  Analysis a = analyze(job);
  ASSERT_EQ(a.exit_code, 1) << a.text << "\n--- the job:\n" << job.torchrun.output;
  ASSERT_TRUE(a.report.is_object()) << a.text;
  EXPECT_EQ(a.report.at("dumps").at("usable").size(), 4u) << a.text;
  EXPECT_EQ(a.report.at("verdict").at("kind"), "never-joined") << a.text;
  EXPECT_EQ(a.report.at("verdict").at("culprits"), nlohmann::json::array({2})) << a.text;
}

// Issue 44: rank 1 skips the rest of step 2 (the loss's all_reduce and the barrier) and goes on
// with step 3, whose first all_reduce completes against the others' loss all_reduce; the next
// one meets their barrier. At 2 ranks there is no majority: rank 1's own order of calls (the
// gradients' all_reduce twice in a row, never so before) names it, not the healthy rank 0, and
// the text and the JSON tell the same story. At 3 ranks the majority names it as before.
TEST(PytorchJobs, ARankThatSkipsTheRestOfAStepIsNamedAtTwoAndThreeRanks) {
  ASSERT_EQ(::access((kBin + "/torchrun").c_str(), X_OK), 0) << "no torchrun beside " << DDX_PYTHON;
  for (int ranks : {2, 3}) {
    Job job = run_job("rest", "pickle", ranks, 1);
    Analysis a = analyze(job);
    ASSERT_EQ(a.exit_code, 1) << a.text << "\n--- the job:\n" << job.torchrun.output;
    ASSERT_TRUE(a.report.is_object()) << a.text;
    const auto& verdict = a.report.at("verdict");
    EXPECT_EQ(verdict.at("kind"), "op-mismatch") << a.text;
    EXPECT_EQ(verdict.at("culprits"), nlohmann::json::array({1})) << a.text;
    EXPECT_EQ(verdict.at("op"), "all_reduce") << a.text;
    EXPECT_EQ(verdict.at("expected_op"), "barrier") << a.text;
    EXPECT_EQ(verdict.at("seq"), 9) << a.text;  // steps 0 and 1 made #1..#6; #7 and #8 matched
    EXPECT_NE(a.text.find("VERDICT: op-mismatch: rank 1 called all_reduce as #9 on group 0 (default_pg)"),
              std::string::npos)
        << a.text;
    EXPECT_NE(a.text.find("where the others called barrier [culprit: rank 1]"), std::string::npos) << a.text;
    EXPECT_EQ(a.report.at("verdict_line").get<std::string>().rfind("VERDICT: op-mismatch: rank 1 called all_reduce", 0),
              0u)
        << a.text;
    const std::string decided = verdict.at("decided_by");
    if (ranks == 2) {
      EXPECT_EQ(decided.rfind("no majority (1 vs 1); rank 1 left the order of calls its earlier steps repeat", 0), 0u)
          << a.text;
    } else {
      EXPECT_EQ(decided, "majority: ranks 0,2 called barrier (2 of 3)") << a.text;
    }
  }
}

// The same skip in the job's first step: neither rank has an earlier step to compare with, so
// nothing decides. The verdict says so and names no rank, in the text and in the JSON alike.
TEST(PytorchJobs, TwoRanksThatPartInTheFirstStepAreUndecided) {
  ASSERT_EQ(::access((kBin + "/torchrun").c_str(), X_OK), 0) << "no torchrun beside " << DDX_PYTHON;
  Job job = run_job("rest", "pickle", 2, 1, 0);
  Analysis a = analyze(job);
  ASSERT_EQ(a.exit_code, 1) << a.text << "\n--- the job:\n" << job.torchrun.output;
  ASSERT_TRUE(a.report.is_object()) << a.text;
  const auto& verdict = a.report.at("verdict");
  EXPECT_EQ(verdict.at("kind"), "op-mismatch") << a.text;
  EXPECT_EQ(verdict.at("culprits"), nlohmann::json::array()) << a.text;
  EXPECT_EQ(verdict.at("affected"), nlohmann::json::array({0, 1})) << a.text;
  EXPECT_EQ(verdict.at("op"), "") << a.text;
  EXPECT_EQ(verdict.at("decided_by").get<std::string>().rfind("undecided: no majority (1 vs 1)", 0), 0u) << a.text;
  EXPECT_NE(a.text.find("VERDICT: op-mismatch: ranks disagree on #3 on group 0 (default_pg): rank 0 called barrier"),
            std::string::npos)
      << a.text;
  EXPECT_NE(a.text.find("nothing shows which side changed [culprit: undecided]"), std::string::npos) << a.text;
  EXPECT_EQ(a.text.find("'s stack at"), std::string::npos) << a.text;
}

// ddx's own recorder in PyTorch's layout (DDX_FR_FORMAT): a planted hang of `ddx probe hang`,
// its dumps read by torchfrtrace (which crashes on PyTorch's own Gloo dumps) and by ddx analyze,
// and both must name the planted rank.
TEST(DdxDumpsInPyTorchLayout, TorchfrtraceReadsThemAndAgreesWithDdxAnalyze) {
  const std::string dir = scratch_dir("pytorch-fr", "ddx-writes-pytorch");
  const std::string traces = dir + "/traces";
  RunResult probe = run_in(dir,
                           {DDX_BIN, "probe", "hang", "--scenario", "mismatched-op", "--culprit-rank", "2", "-np", "4",
                            "--timeout", "2s", "--trace-dir", traces, "--quiet"},
                           {{"DDX_FR_FORMAT", "both"}}, 120);
  ASSERT_EQ(probe.exit_code, 0) << probe.output;
  EXPECT_TRUE(processes_left(dir).empty());
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(std::filesystem::exists(traces + "/nccl_trace_rank_" + std::to_string(r))) << r;
    EXPECT_TRUE(std::filesystem::exists(traces + "/ddx-fr-rank" + std::to_string(r) + ".json")) << r;
  }

  // ddx analyze on the pickles alone names the culprit as it does on its JSON...
  RunResult pickles = run_in(dir, {DDX_BIN, "analyze", "--json", "-p", "nccl_trace_rank_", traces}, {}, 60);
  ASSERT_EQ(pickles.exit_code, 1) << pickles.output;
  const nlohmann::json report = nlohmann::json::parse(pickles.output.substr(pickles.output.find('{')));
  EXPECT_EQ(report.at("verdict").at("kind"), "op-mismatch") << pickles.output;
  EXPECT_EQ(report.at("verdict").at("culprits"), nlohmann::json::array({2})) << pickles.output;
  EXPECT_EQ(report.at("dumps").at("usable").size(), 4u) << pickles.output;
  // ...and reads a folder of both as one dump per rank, without a duplicate warning.
  RunResult both = run_in(dir, {DDX_BIN, "analyze", traces}, {}, 60);
  EXPECT_EQ(both.exit_code, 1) << both.output;
  EXPECT_EQ(both.output.find("warning"), std::string::npos) << both.output;
  EXPECT_NE(both.output.find("VERDICT: op-mismatch"), std::string::npos) << both.output;

  // PyTorch's reader on ddx's pickles: no traceback, and the same culprit.
  RunResult theirs = run_in(dir, {kBin + "/torchfrtrace", "-p", "nccl_trace_rank_", traces}, {}, 120);
  EXPECT_EQ(theirs.exit_code, 0) << theirs.output;
  EXPECT_EQ(theirs.output.find("Traceback"), std::string::npos) << theirs.output;
  EXPECT_NE(theirs.output.find("Culprit rank 2"), std::string::npos) << theirs.output;
  for (int other : {0, 1, 3}) {
    EXPECT_EQ(theirs.output.find("Culprit rank " + std::to_string(other)), std::string::npos) << theirs.output;
  }
  // Its missing ranks too: none but the culprit.
  EXPECT_EQ(ranks_torchfrtrace_names(theirs.output), std::set<int>{2}) << theirs.output;
  // -j lists the recorded ops as torchfrtrace -j does, narrowed by its flags.
  RunResult listing = run_in(dir,
                             {DDX_BIN, "analyze", "-j", "--selected-ranks", "2", "--pg-filters", "default_pg", traces},
                             {}, 60);
  EXPECT_EQ(listing.exit_code, 0) << listing.output;
  EXPECT_NE(listing.output.find("rank 2 ("), std::string::npos) << listing.output;
  EXPECT_EQ(listing.output.find("rank 0 ("), std::string::npos) << listing.output;
  EXPECT_NE(listing.output.find("all_gather"), std::string::npos) << listing.output;
}

// benchmarks/analyze_scale.py at a small size: NCCL-named dumps in PyTorch's schema (a world
// group and 8-rank node groups, a wrapped ring, Python frames) with a rank stuck in compute;
// ddx names it, and so does torchfrtrace on the same files.
TEST(AnalyzeScale, SmallNcclShapedDumpsNameTheCulpritAsTorchfrtraceDoes) {
  const std::string dir = scratch_dir("pytorch-fr", "scale-small");
  RunResult r = run_in(dir,
                       {DDX_PYTHON, std::string(DDX_SOURCE_DIR) + "/benchmarks/analyze_scale.py", "--ddx", DDX_BIN,
                        "--ranks", "32", "--entries", "200", "--culprit", "13", "--dir", dir + "/dumps", "--repeat", "1"},
                       {}, 240);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("names rank 13"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("culprits named: ['13']"), std::string::npos) << r.output;
}

// --trace: one Perfetto process per rank, a slice per op, the culprit marked.
TEST(PytorchJobs, TheTraceHasALanePerRankAndMarksTheCulprit) {
  ASSERT_EQ(::access((kBin + "/torchrun").c_str(), X_OK), 0) << "no torchrun beside " << DDX_PYTHON;
  Job job = run_job("compute", "pickle");
  const std::string trace = job.dir + "/trace.json";
  RunResult r = run_in(job.dir, {DDX_BIN, "analyze", "--trace", trace, job.traces}, {}, 60);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  std::ifstream in(trace);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.output;
  std::map<int, std::string> process_names;
  std::map<int, int> slices;
  int verdicts = 0, in_flight = 0;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") process_names[e.at("pid")] = e.at("args").at("name");
    if (e.at("ph") == "X" && e.at("cat") == "collective") {
      ++slices[e.at("pid").get<int>()];
      EXPECT_GE(e.at("dur").get<int64_t>(), 1);
      EXPECT_GE(e.at("ts").get<int64_t>(), 0);
      if (e.at("name").get<std::string>().find("(in flight)") != std::string::npos) ++in_flight;
    }
    if (e.at("ph") == "i" && e.at("name").get<std::string>().rfind("VERDICT", 0) == 0) {
      ++verdicts;
      EXPECT_EQ(e.at("pid"), 2);
    }
  }
  EXPECT_EQ(process_names.size(), 4u);
  EXPECT_NE(process_names[2].find("CULPRIT"), std::string::npos);
  EXPECT_EQ(process_names[0].find("CULPRIT"), std::string::npos);
  // Rank 2 stopped in compute after two collectives; the others went on into the third.
  for (int rank = 0; rank < 4; ++rank) EXPECT_GE(slices[rank], rank == 2 ? 2 : 3) << rank;
  EXPECT_EQ(verdicts, 1);
  EXPECT_GE(in_flight, 3);  // the three ranks waiting for rank 2
  EXPECT_TRUE(std::filesystem::exists(job.dir + "/trace.svg")) << r.output;
}

}  // namespace
}  // namespace ddx::testing
