// `ddx validate` end to end at 2 ranks (every stage PASSes, one report with its HTML page),
// and planted bad stages: a wrong collective (DDX_FAULT=corrupt-collective) FAILs the report at the
// selfcheck, a busbw floor no link reaches (--expect) at the bandwidth stage; nothing runs after.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

// A stage of validate.json by name (stages are added over time; tests must not count them).
const nlohmann::json& stage(const nlohmann::json& report, const std::string& name) {
  for (const auto& s : report["stages"]) {
    if (s["stage"] == name) return s;
  }
  throw std::runtime_error("no stage " + name + " in " + report.dump());
}

size_t stage_index(const nlohmann::json& report, const std::string& name) {
  for (size_t i = 0; i < report["stages"].size(); ++i) {
    if (report["stages"][i]["stage"] == name) return i;
  }
  throw std::runtime_error("no stage " + name);
}

// The test cases of a JUnit file (harness/common/junit.h writes one <testcase> a line), "classname: name"
// to "passed", "failed" or "skipped"; and the names of the failed ones.
std::map<std::string, std::string> junit_cases(const std::string& xml) {
  std::map<std::string, std::string> cases;
  std::istringstream in(xml);
  for (std::string line; std::getline(in, line);) {
    if (line.find("<testcase ") == std::string::npos) continue;
    auto attribute = [&](const std::string& name) {
      const size_t at = line.find(" " + name + "=\"");
      if (at == std::string::npos) return std::string();
      const size_t from = at + name.size() + 3;
      return line.substr(from, line.find('"', from) - from);
    };
    const bool failed = has(line, "<failure"), skipped = has(line, "<skipped");
    cases[attribute("classname") + ": " + attribute("name")] = failed ? "failed" : skipped ? "skipped" : "passed";
  }
  return cases;
}

std::vector<std::string> failed_cases(const std::map<std::string, std::string>& cases) {
  std::vector<std::string> failed;
  for (const auto& [name, status] : cases) {
    if (status == "failed") failed.push_back(name);
  }
  return failed;
}

std::vector<std::string> validate(const std::string& out) {
  return {DDX_BIN, "validate", "--np", "2", "--out", out, "--max-bytes", "64K", "--parity-steps", "2",
          "--burn-in-steps", "4", "--stage-timeout", "240"};
}

TEST(Validate, EveryStagePassesAtTwoRanksAndOneReportLinksThemAll) {
  const std::string dir = scratch_dir("validate", "pass");
  auto argv = validate(dir + "/report");
  argv.insert(argv.end(), {"--junit", dir + "/junit.xml"});
  RunResult r = run_in(dir, argv, {}, 550);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"doctor", "gpu health", "selfcheck", "compute", "memory", "bandwidth", "pairwise links", "parity", "burn-in"}) {
    EXPECT_TRUE(has(r.output, name)) << r.output;
  }
  EXPECT_TRUE(has(r.output, "[9/9] burn-in")) << r.output;  // progress: stage k of n as it starts
  // Every stage's summary reads "<stage>: counts", the pairwise one too (not the probe's "# ..." comment).
  EXPECT_TRUE(has(r.output, "PASS (")) << r.output;
  EXPECT_FALSE(has(r.output, "# ddx probe bandwidth --pairs")) << r.output;
  EXPECT_TRUE(has(r.output, "  pairwise: 1 links, 0 slow, 0 slow ranks\n")) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  EXPECT_TRUE(report["passed"].get<bool>());
  ASSERT_EQ(report["stages"].size(), 9u);
  for (const auto& s : report["stages"]) EXPECT_TRUE(s["passed"].get<bool>()) << s.dump();
  for (const char* file : {"doctor.json", "selfcheck.json", "busbw.svg", "parity/report.json", "validate.md",
                           "burn-in/metrics.jsonl", "burn-in/loss.svg", "validate.html"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/report/" + file)) << file;
  }
  EXPECT_TRUE(has(read_file(dir + "/report/validate.md"), "![busbw.svg](busbw.svg)"));
  // The bandwidth stage was held to the floor of the link type the doctor's facts show.
  const auto& bw = stage(report, "bandwidth");
  EXPECT_EQ(bw["details"]["min_busbw_gbs"].get<double>(), 0.002) << bw.dump();
  EXPECT_TRUE(has(bw["details"]["threshold_source"].get<std::string>(), "detected cpu-loopback")) << bw.dump();
  EXPECT_GE(bw["details"]["collectives"].size(), 7u) << bw.dump();  // --op-list all
  // One self-contained page: every plot inline, nothing loaded from elsewhere.
  const std::string html = read_file(dir + "/report/validate.html");
  for (const char* part : {"ddx validate: <span class=\"PASS\">PASS</span>", "<h2>Doctor</h2>",
                           "detected cpu-loopback", "Bus bandwidth vs message size", "Pairwise link bandwidth",
                           "Parity: loss curves", "Training burn-in: loss curve", "Compute (matrix multiply)",
                           "Memory bandwidth (STREAM)", "<h2>GPU health</h2>"}) {
    EXPECT_TRUE(has(html, part)) << part;
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_TRUE(has(html, ">1 " + std::string(host) + ":1</text>")) << "heat map rows name rank, host, local rank";
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 4u);
  EXPECT_FALSE(has(html, "src=")) << "the page must not load other files";
  // JUnit: no failure, and a passed case for every stage (issue 46, item 4).
  const std::string junit = read_file(dir + "/junit.xml");
  EXPECT_TRUE(has(junit, " failures=\"0\" ")) << junit;
  const auto cases = junit_cases(junit);
  EXPECT_EQ(failed_cases(cases), std::vector<std::string>{}) << junit;
  for (const char* name : {"doctor", "gpu health", "selfcheck", "compute", "memory", "bandwidth", "pairwise links",
                           "parity", "burn-in"}) {
    const auto it = cases.find(std::string("ddx.validate: ") + name);
    ASSERT_NE(it, cases.end()) << name << "\n" << junit;
    EXPECT_EQ(it->second, "passed") << name << "\n" << junit;
  }
  EXPECT_TRUE(cases.count("ddx.validate.compute: fp32 n=256 rank 1 (" + std::string(host) + ")")) << junit;
}

TEST(Validate, ABusbwFloorNoLinkReachesFailsAtTheBandwidthStage) {
  const std::string dir = scratch_dir("validate", "expect");
  auto argv = validate(dir + "/report");
  argv.insert(argv.end(), {"--expect", "100GB/s"});  // NVLink's floor, at a size of our own
  RunResult r = run_in(dir, argv, {}, 300);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  const auto& stages = report["stages"];
  const size_t b = stage_index(report, "bandwidth");
  for (size_t i = 0; i < b; ++i) EXPECT_TRUE(stages[i]["passed"].get<bool>()) << stages[i].dump();
  EXPECT_FALSE(stages[b]["passed"].get<bool>()) << stages[b].dump();
  EXPECT_TRUE(has(stages[b]["summary"].get<std::string>(), "below 100 GB/s busbw")) << stages[b].dump();
  EXPECT_TRUE(has(stages[b]["summary"].get<std::string>(), "--expect 100 GB/s")) << stages[b].dump();
  for (size_t i = b + 1; i < stages.size(); ++i) EXPECT_FALSE(stages[i]["ran"].get<bool>()) << stages[i].dump();
  EXPECT_TRUE(has(read_file(dir + "/report/validate.html"), "<td class=\"FAIL\">FAIL</td>"));
}

TEST(Validate, AnUnknownExpectIsOneLineAndRunsNothing) {
  const std::string dir = scratch_dir("validate", "bad-expect");
  auto argv = validate(dir + "/report");
  argv.insert(argv.end(), {"--expect", "warp-drive"});
  RunResult r = run_in(dir, argv, {}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output,
            "ddx: error: --expect warp-drive: not a link type (cpu-loopback, ethernet, pcie, nvlink, infiniband) or a "
            "busbw in GB/s (e.g. 25 or 25GB/s)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/report"));
  // NVLink's floor at the 64K these tests sweep to would judge latency: refused, naming the size.
  auto small = validate(dir + "/report");
  small.insert(small.end(), {"--expect", "nvlink"});
  RunResult nvlink = run_in(dir, small, {}, 60);
  EXPECT_EQ(nvlink.exit_code, 2) << nvlink.output;
  EXPECT_EQ(nvlink.output.rfind("ddx: error: --expect nvlink judges busbw at 256M or more", 0), 0u) << nvlink.output;
  EXPECT_TRUE(has(nvlink.output, "pass --max-bytes 256M or larger")) << nvlink.output;
  EXPECT_EQ(std::count(nvlink.output.begin(), nvlink.output.end(), '\n'), 1) << nvlink.output;
  auto bad_size = validate(dir + "/report");
  bad_size.insert(bad_size.end(), {"--max-bytes", "12Q"});
  RunResult size = run_in(dir, bad_size, {}, 60);
  EXPECT_EQ(size.exit_code, 2) << size.output;
  EXPECT_TRUE(has(size.output, "--max-bytes")) << size.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/report"));

  // A baseline that is not an earlier validate.json stops the run before its first stage.
  std::ofstream(dir + "/not-validate.json") << "{\"stages\": []}\n";
  auto bad_baseline = validate(dir + "/report");
  bad_baseline.insert(bad_baseline.end(), {"--baseline", dir + "/not-validate.json"});
  RunResult baseline = run_in(dir, bad_baseline, {}, 60);
  EXPECT_EQ(baseline.exit_code, 2) << baseline.output;
  EXPECT_EQ(baseline.output.rfind("ddx: error: --baseline " + dir + "/not-validate.json: no \"figures\" in it", 0), 0u)
      << baseline.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/report"));
}

// An output folder that cannot be written, and an --expectations row that breaks the rule, are
// one line each before any stage (not a C++ stack trace after the first); a file given as --out
// is left as it was.
TEST(Validate, AnUnwritableOutAndABadExpectationsRowAreOneLineAndRunNothing) {
  const std::string dir = scratch_dir("validate", "bad-out");
  RunResult proc = run_in(dir, validate("/proc/nope"), {}, 60);
  EXPECT_EQ(proc.exit_code, 2) << proc.output;
  EXPECT_EQ(proc.output.rfind("ddx: error: --out /proc/nope cannot be written: /proc does not take new files", 0), 0u)
      << proc.output;
  EXPECT_EQ(std::count(proc.output.begin(), proc.output.end(), '\n'), 1) << proc.output;
  std::ofstream(dir + "/a-file") << "mine\n";
  RunResult file = run_in(dir, validate(dir + "/a-file"), {}, 60);
  EXPECT_EQ(file.exit_code, 2) << file.output;
  EXPECT_EQ(file.output, "ddx: error: --out " + dir + "/a-file cannot be written: " + dir + "/a-file is a file, not a folder\n");
  EXPECT_EQ(read_file(dir + "/a-file"), "mine\n");

  std::ofstream(dir + "/ours.json") << R"([{"sku": "X", "match": ["X"]}, {"sku": "Y", "peak_tflops": {"bf16": 1}}])";
  auto argv = validate(dir + "/report");
  argv.insert(argv.end(), {"--expectations", dir + "/ours.json"});
  RunResult row = run_in(dir, argv, {}, 60);
  EXPECT_EQ(row.exit_code, 2) << row.output;
  EXPECT_EQ(row.output, "ddx: error: --expectations " + dir + "/ours.json: row 2: needs a sku and at least one match string\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/report"));
}

// A second run into the same --out (the default folder makes this the common case) judges only
// what it wrote itself: the earlier run's files are moved aside, whole, and said so. The way it
// failed: a first run swept to 1M, a second with --expect 0.5 --max-bytes 64K was judged on the
// first run's bandwidth.json (the probe wrote bandwidth.json.0) and PASSed "at 1M bytes". Here the
// second FAILs at 64K (CPU loopback at 64K is far below 0.5 GB/s, at 1M above it). Its --baseline
// is the first run's validate.json in that same folder: read from where it was moved, compared
// with the first run's figures, and left as it was.
TEST(Validate, ASecondRunIntoTheSameFolderJudgesItsOwnFilesAndKeepsTheFirst) {
  const std::string dir = scratch_dir("validate", "second-run");
  const std::string out = dir + "/report";
  auto first = validate(out);
  *(std::find(first.begin(), first.end(), "--max-bytes") + 1) = "1M";
  RunResult one = run_in(dir, first, {}, 550);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string first_report = read_file(out + "/validate.json");
  const auto first_figures = nlohmann::json::parse(first_report)["figures"];
  EXPECT_TRUE(has(stage(nlohmann::json::parse(first_report), "bandwidth")["summary"].get<std::string>(), " at 1M bytes"));

  auto second = validate(out);
  second.insert(second.end(), {"--expect", "0.5", "--baseline", out + "/validate.json"});
  RunResult two = run_in(dir, second, {}, 550);
  EXPECT_EQ(two.exit_code, 1) << two.output;
  const std::string moved_line = "ddx validate: " + out + " held an earlier run's files: moved them to " + out + ".previous-";
  ASSERT_EQ(two.output.rfind(moved_line, 0), 0u) << two.output;
  const size_t name_at = moved_line.size() - std::string(".previous-").size() - out.size();
  const std::string previous = two.output.substr(name_at, two.output.find(';', name_at) - name_at);
  EXPECT_TRUE(has(two.output, "; the --baseline is read from there: " + previous + "/validate.json\n")) << two.output;
  EXPECT_EQ(read_file(previous + "/validate.json"), first_report) << "the baseline was overwritten";
  EXPECT_TRUE(std::filesystem::exists(previous + "/bandwidth.json"));

  const auto report = nlohmann::json::parse(read_file(out + "/validate.json"));
  const auto& bw = stage(report, "bandwidth");
  EXPECT_FALSE(bw["passed"].get<bool>()) << bw.dump();
  EXPECT_TRUE(has(bw["summary"].get<std::string>(), "below 0.5 GB/s busbw at 64K bytes")) << bw.dump();
  EXPECT_EQ(bw["details"]["collectives"][0]["bytes"].get<double>(), 65536) << bw.dump();
  EXPECT_FALSE(std::filesystem::exists(out + "/bandwidth.json.0"));
  EXPECT_FALSE(std::filesystem::exists(out + "/pairs.json")) << "the pairwise stage did not run: no file of its may be here";
  // Compared with the first run's figures, every one of them looked up (or counted missing).
  const auto& b = stage(report, "baseline");
  EXPECT_EQ(b["details"]["baseline"], previous + "/validate.json") << b.dump();
  EXPECT_EQ(b["details"]["compared"].get<size_t>() + b["details"]["missing"].size(), first_figures.size()) << b.dump();
  EXPECT_GT(b["details"]["compared"].get<size_t>(), 0u) << b.dump();
}

// --baseline: a run against last week's figures. Here "last week" was far faster on compute
// (every rank's fp32 n=256 figure 1e6 TFLOP/s) and had a collective this run lacks: the stages
// all pass, the baseline stage FAILs with before and after, in the output, the report and the
// JUnit XML (one case per stage and per check).
TEST(Validate, ABaselineRegressionFailsWithBeforeAndAfterAndJunitShowsEveryCase) {
  const std::string dir = scratch_dir("validate", "baseline");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  nlohmann::json baseline = {{"figures",
                              {{"compute fp32 n=256 TFLOP/s @ " + std::string(host) + ":0", 1e6},
                               {"compute fp32 n=256 TFLOP/s @ " + std::string(host) + ":1", 1e6},
                               {"memory host copy GB/s @ " + std::string(host) + ":0", 1e-6},
                               {"bandwidth warp_drive busbw GB/s", 5.0}}}};
  std::ofstream(dir + "/last-week.json") << baseline.dump(2);
  auto argv = validate(dir + "/report");
  argv.insert(argv.end(), {"--baseline", dir + "/last-week.json", "--junit", dir + "/junit.xml"});
  RunResult r = run_in(dir, argv, {}, 550);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "[1/10] doctor ")) << r.output;  // the baseline stage counted from the first line
  EXPECT_TRUE(has(r.output, "[10/10] baseline        ... FAIL  3 figures compared with the baseline, 2 regressed by more "
                            "than 10% (or 3x their jitter); worst: compute fp32 n=256 TFLOP/s @ "))
      << r.output;
  EXPECT_TRUE(has(r.output, "; 1 baseline figures not measured this time")) << r.output;
  EXPECT_TRUE(has(r.output, "compute fp32 n=256 TFLOP/s @ " + std::string(host) + ":1: 1e+06 -> ")) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  for (const auto& s : report["stages"]) {
    EXPECT_EQ(s["passed"].get<bool>(), s["stage"] != "baseline") << s.dump();
  }
  const auto& b = stage(report, "baseline");
  ASSERT_EQ(b["details"]["regressions"].size(), 2u) << b.dump();
  EXPECT_EQ(b["details"]["regressions"][0]["before"].get<double>(), 1e6);
  EXPECT_EQ(b["details"]["missing"][0], "bandwidth warp_drive busbw GB/s");
  // This run's own figures are in its validate.json: next week's baseline.
  const auto& own = report["figures"]["compute fp32 n=256 TFLOP/s @ " + std::string(host) + ":0"];
  EXPECT_GT(own["value"].get<double>(), 0) << own.dump();
  EXPECT_GE(own["jitter"].get<double>(), 0) << own.dump();
  EXPECT_TRUE(has(read_file(dir + "/report/validate.html"), "<h2>Against the baseline</h2>"));
  EXPECT_TRUE(has(read_file(dir + "/report/validate.md"), "## Regressions against the baseline"));
  const std::string junit = read_file(dir + "/junit.xml");
  for (const char* part : {"classname=\"ddx.validate\" name=\"compute\"", "classname=\"ddx.validate.doctor\"",
                           "classname=\"ddx.validate.bandwidth\" name=\"all_reduce\"",
                           "classname=\"ddx.validate.compute\" name=\"fp32 n=256 rank 1",
                           "classname=\"ddx.validate.memory\"", "classname=\"ddx.validate.baseline\""}) {
    EXPECT_TRUE(has(junit, part)) << part << "\n" << junit;
  }
  EXPECT_TRUE(has(junit, "<failure")) << junit;
  // Exactly the baseline stage and its two regressions failed; every other stage passed.
  EXPECT_TRUE(has(junit, " failures=\"3\" ")) << junit;
  const auto cases = junit_cases(junit);
  EXPECT_EQ(failed_cases(cases),
            (std::vector<std::string>{"ddx.validate.baseline: compute fp32 n=256 TFLOP/s @ " + std::string(host) + ":0",
                                      "ddx.validate.baseline: compute fp32 n=256 TFLOP/s @ " + std::string(host) + ":1",
                                      "ddx.validate: baseline"}))
      << junit;
  for (const auto& s : report["stages"]) {
    const auto it = cases.find("ddx.validate: " + s["stage"].get<std::string>());
    ASSERT_NE(it, cases.end()) << s.dump() << "\n" << junit;
    if (s["stage"] != "baseline") EXPECT_EQ(it->second, "passed") << s.dump();
  }
}

// validate starts its stages' ranks itself: started as a rank of a launched job (ddx launch,
// torchrun's variables, MPI, srun) every rank refuses with one line before anything is written,
// so two copies can never write one report.
TEST(Validate, StartedAsARankOfALaunchedJobRefusesAndWritesNothing) {
  const std::string dir = scratch_dir("validate", "under-launcher");
  std::vector<std::string> argv = {DDX_BIN, "launch", "-np", "2", "--"};
  const auto inner = validate(dir + "/report");
  argv.insert(argv.end(), inner.begin(), inner.end());
  RunResult r = run_in(dir, argv, {}, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  // Each rank refuses. The first one to exit ends the job, so the launcher may stop the other
  // before it has said so; its table then says that rank was stopped.
  int refused = 0;
  for (const char* rank : {"rank 0 of 2 (RANK/WORLD_SIZE)", "rank 1 of 2 (RANK/WORLD_SIZE)"}) {
    if (has(r.output, std::string("ddx: error: ddx validate was started as ") + rank)) ++refused;
  }
  EXPECT_GE(refused, 1) << r.output;
  EXPECT_TRUE(refused == 2 || has(r.output, "stopped by launcher")) << r.output;
  EXPECT_FALSE(has(r.output, "[1/")) << r.output;  // no stage started, whatever their number
  EXPECT_FALSE(std::filesystem::exists(dir + "/report"));
  // The other launchers' variables, one process each: the same line, exit 2.
  const std::vector<std::map<std::string, std::string>> launched = {
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}},
      {{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}},
      {{"SLURM_PROCID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"}}};
  for (const auto& env : launched) {
    RunResult one = run_in(dir, validate(dir + "/report"), env, 60);
    EXPECT_EQ(one.exit_code, 2) << one.output;
    EXPECT_EQ(one.output.rfind("ddx: error: ddx validate was started as rank ", 0), 0u) << one.output;
    EXPECT_EQ(std::count(one.output.begin(), one.output.end(), '\n'), 1) << one.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/report"));
  }
  // One task of a one-task step (srun -n 1, or a batch script) is not a launched rank.
  // (A bad --expect, checked right after, stops it before any stage.)
  auto past_the_check = validate(dir + "/report");
  past_the_check.insert(past_the_check.end(), {"--expect", "warp-drive"});
  RunResult single = run_in(dir, past_the_check, {{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}, 60);
  EXPECT_EQ(single.exit_code, 2) << single.output;
  EXPECT_TRUE(has(single.output, "ddx: error: --expect warp-drive")) << single.output;
}

// A doctor FAIL (an interface that does not exist) stops validate at its first stage, with the
// doctor's count; nothing after it runs.
TEST(Validate, ADoctorFailStopsAtTheFirstStage) {
  const std::string dir = scratch_dir("validate", "doctor-fail");
  RunResult r = run_in(dir, validate(dir + "/report"), {{"GLOO_SOCKET_IFNAME", "nosuch1"}}, 120);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  const auto& stages = report["stages"];
  EXPECT_FALSE(stages[0]["passed"].get<bool>()) << stages[0].dump();
  EXPECT_TRUE(has(stages[0]["summary"].get<std::string>(), "doctor: 15 checks: ")) << stages[0].dump();
  EXPECT_TRUE(has(stages[0]["summary"].get<std::string>(), " 2 FAIL")) << stages[0].dump();
  for (size_t i = 1; i < stages.size(); ++i) EXPECT_FALSE(stages[i]["ran"].get<bool>()) << stages[i].dump();
}

// --keep-going runs every stage after a FAIL. A rank that stops issuing collectives at step 3
// (hang@rank=1,step=3, in every stage's environment): the stages without training steps pass,
// the parity stage's single-device baseline refuses a fault on rank 1 (its one line is the
// summary), and the burn-in hangs: its 60 s collective timeout dumps every rank's flight
// recorder into <out>/traces and `ddx analyze` names rank 1 in the stage's summary.
TEST(Validate, KeepGoingRunsEveryStageAndAHungBurnInIsNamedByTheAnalyzer) {
  const std::string dir = scratch_dir("validate", "hung-burn-in");
  auto argv = validate(dir + "/report");
  argv.push_back("--keep-going");
  RunResult r = run_in(dir, argv, {{"DDX_FAULT", "hang@rank=1,step=3"}}, 500);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  const auto& stages = report["stages"];
  ASSERT_EQ(stages.size(), 9u);
  const size_t p = stage_index(report, "parity"), burn = stage_index(report, "burn-in");
  for (size_t i = 0; i < p; ++i) EXPECT_TRUE(stages[i]["passed"].get<bool>()) << stages[i].dump();
  EXPECT_FALSE(stages[p]["passed"].get<bool>()) << stages[p].dump();
  EXPECT_TRUE(has(stages[p]["summary"].get<std::string>(), "ddx: error: DDX_FAULT 'hang@rank=1,step=3': rank 1 is outside"))
      << stages[p].dump();
  EXPECT_TRUE(stages[burn]["ran"].get<bool>()) << stages[burn].dump();  // burn-in, after the FAIL
  EXPECT_FALSE(stages[burn]["passed"].get<bool>()) << stages[burn].dump();
  EXPECT_EQ(stages[burn]["summary"].get<std::string>().rfind("VERDICT: never-joined: rank 1 never joined all_reduce", 0), 0u)
      << stages[burn].dump();
  EXPECT_LT(stages[burn]["seconds"].get<double>(), 200) << "the burn-in's 60 s collective timeout, not the stage's 240 s";
  EXPECT_TRUE(std::filesystem::exists(dir + "/report/traces/ddx-fr-rank0.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/report/analyze.log"));
}

// A slow link FAILs the pairwise stage naming the rank behind it. It takes three ranks: with two
// there is one link, and the rank at either end of it is as slow as the other. Rank 2's sends
// are delayed 10 ms (DDX_FAULT slow-link op=send): its links fall ~50x below the median, while
// the bandwidth stage's sendrecv at 64K stays ~3x over its cpu-loopback floor (64K in >= 10 ms
// is <= 6.5 MB/s, the floor 2 MB/s), so the stages before pass and nothing runs after the FAIL.
TEST(Validate, ASlowLinkFailsThePairwiseStageNamingItsRankAtThreeRanks) {
  const std::string dir = scratch_dir("validate", "slow-link");
  auto argv = validate(dir + "/report");
  argv[3] = "3";  // --np
  RunResult r = run_in(dir, argv, {{"DDX_FAULT", "slow-link@rank=2,op=send,ms=10"}}, 400);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  const auto& stages = report["stages"];
  ASSERT_EQ(stages.size(), 9u);
  const size_t pw = stage_index(report, "pairwise links");
  for (size_t i = 0; i < pw; ++i) EXPECT_TRUE(stages[i]["passed"].get<bool>()) << stages[i].dump();
  EXPECT_FALSE(stages[pw]["passed"].get<bool>()) << stages[pw].dump();
  EXPECT_EQ(stages[pw]["summary"].get<std::string>(), "pairwise: 3 links, 2 slow, 1 slow ranks: rank 2")
      << stages[pw].dump();
  const auto pairs = nlohmann::json::parse(read_file(dir + "/report/pairs.json"));
  EXPECT_TRUE(has(pairs.dump(), "\"slow_ranks\"")) << pairs.dump();
  const auto& slow = pairs["ddx"]["slow_ranks"];
  ASSERT_EQ(slow.size(), 1u) << pairs.dump();
  EXPECT_EQ(slow[0]["rank"], 2) << pairs.dump();
  for (size_t i = pw + 1; i < stages.size(); ++i) EXPECT_FALSE(stages[i]["ran"].get<bool>()) << stages[i].dump();
}

// --launcher: every stage but parity runs under the given prefix, here MPICH's mpiexec (ranks from
// PMI_RANK/PMI_SIZE, no ddx launch). A wrong collective planted on rank 1 stops it after the
// selfcheck, which is as far as the launcher needs showing: the doctor ran 2 ranks under it, and
// the selfcheck's failure came from rank 1 of the mpiexec job.
TEST(Validate, LauncherRunsTheStagesUnderMpiexec) {
  DDX_SKIP_IF_REFUSED(std::system("command -v mpiexec >/dev/null 2>&1") == 0 ? "" : "mpiexec is not installed");
  const std::string dir = scratch_dir("validate", "mpiexec");
  auto argv = validate(dir + "/report");
  argv.insert(argv.end(), {"--launcher", "mpiexec -n 2"});
  RunResult r = run_in(dir, argv, {{"DDX_FAULT", "corrupt-collective@rank=1"}}, 300);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  EXPECT_EQ(report["launcher"], "mpiexec -n 2") << report.dump();
  const auto& stages = report["stages"];
  const size_t sc = stage_index(report, "selfcheck");
  for (size_t i = 0; i < sc; ++i) EXPECT_TRUE(stages[i]["passed"].get<bool>()) << stages[i].dump();
  EXPECT_FALSE(stages[sc]["passed"].get<bool>()) << stages[sc].dump();
  EXPECT_TRUE(has(stages[sc]["summary"].get<std::string>(), " FAILED")) << stages[sc].dump();
  const auto doctor = nlohmann::json::parse(read_file(dir + "/report/doctor.json"));
  EXPECT_EQ(doctor["world_size"], 2) << doctor.dump();
  EXPECT_EQ(doctor["ranks"].size(), 2u) << doctor.dump();
  for (const char* log : {"doctor.log", "selfcheck.log"}) {
    const std::string text = read_file(dir + "/report/" + log);
    EXPECT_FALSE(has(text, "ddx launch:")) << log << " ran under ddx launch:\n" << text;
  }
  for (size_t i = sc + 1; i < stages.size(); ++i) EXPECT_FALSE(stages[i]["ran"].get<bool>()) << stages[i].dump();
}

TEST(Validate, APlantedWrongCollectiveFailsAtTheSelfcheckAndStops) {
  const std::string dir = scratch_dir("validate", "planted");
  RunResult r = run_in(dir, validate(dir + "/report"), {{"DDX_FAULT", "corrupt-collective@rank=1"}}, 300);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "validate: FAIL")) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  EXPECT_FALSE(report["passed"].get<bool>());
  const auto& stages = report["stages"];
  const size_t sc = stage_index(report, "selfcheck");
  for (size_t i = 0; i < sc; ++i) EXPECT_TRUE(stages[i]["passed"].get<bool>()) << stages[i].dump();  // doctor, gpu
  EXPECT_FALSE(stages[sc]["passed"].get<bool>()) << stages[sc].dump();
  EXPECT_TRUE(stages[sc]["ran"].get<bool>());
  // The stage's own summary line, not the launcher's table.
  EXPECT_TRUE(has(stages[sc]["summary"].get<std::string>(), "selfcheck: ")) << stages[sc].dump();
  EXPECT_TRUE(has(stages[sc]["summary"].get<std::string>(), " FAILED")) << stages[sc].dump();
  for (size_t i = sc + 1; i < stages.size(); ++i) EXPECT_FALSE(stages[i]["ran"].get<bool>()) << stages[i].dump();
}

}  // namespace
}  // namespace ddx::testing

// --- The gpu health stage and --expectations on a path that does something (issue 46, item 7) ---
namespace ddx::testing {
namespace {

std::map<std::string, std::string> fake_nvml_env(const std::string& scenario) {
  return {{"DDX_NVML_LIBRARY", FAKE_NVML}, {"FAKE_NVML_SCENARIO", scenario}};
}

// The probe's xid rows are SKIP only where the kernel log is refused (not root, dmesg_restrict).
bool gpu_kernel_log_readable() {
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Every test case of a JUnit file: "<classname>/<name>" -> "failed", "skipped" or "passed".
std::map<std::string, std::string> gpu_stage_junit_cases(const std::string& xml) {
  std::map<std::string, std::string> cases;
  const std::string open = "<testcase classname=\"";
  for (size_t at = xml.find(open); at != std::string::npos; at = xml.find(open, at + 1)) {
    const size_t c = at + open.size(), c_end = xml.find('"', c);
    const size_t n = xml.find("name=\"", c_end) + 6, n_end = xml.find('"', n);
    const size_t end = xml.find("</testcase>", n_end);
    const std::string body = xml.substr(n_end, end - n_end);
    cases[xml.substr(c, c_end - c) + "/" + xml.substr(n, n_end - n)] =
        has(body, "<failure") ? "failed" : has(body, "<skipped") ? "skipped" : "passed";
  }
  return cases;
}

// The fake NVML's planted faults (tests/fake_nvml: FAIL rows on GPUs 1, 2 (two) and 3, WARN rows
// on GPUs 0 and 1) at 4 ranks, each reading its own GPU: validate stops at the gpu health stage,
// and the JUnit XML has that stage and exactly the four FAIL rows as failed cases (WARN rows pass),
// every later stage skipped.
TEST(Validate, PlantedGpuFaultsStopItAtTheGpuHealthStageWithTheirJunitCasesFailed) {
  const std::string dir = scratch_dir("validate", "gpu-faults");
  auto argv = validate(dir + "/report");
  argv[3] = "4";  // --np: one rank per fake GPU
  argv.insert(argv.end(), {"--junit", dir + "/junit.xml"});
  RunResult r = run_in(dir, argv, fake_nvml_env("faults"), 300);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  const auto& stages = report["stages"];
  const size_t g = stage_index(report, "gpu health");
  for (size_t i = 0; i < g; ++i) EXPECT_TRUE(stages[i]["passed"].get<bool>()) << stages[i].dump();
  EXPECT_TRUE(stages[g]["ran"].get<bool>()) << stages[g].dump();
  EXPECT_FALSE(stages[g]["passed"].get<bool>()) << stages[g].dump();
  const int skips = gpu_kernel_log_readable() ? 0 : 4;
  const std::string counts = "gpu-health: 32 checks: " + std::to_string(25 - skips) + " PASS, 3 WARN, 4 FAIL, " +
                             std::to_string(skips) + " SKIP";
  EXPECT_EQ(stages[g]["summary"].get<std::string>().rfind(counts, 0), 0u) << counts << "\n" << stages[g].dump();
  for (size_t i = g + 1; i < stages.size(); ++i) EXPECT_FALSE(stages[i]["ran"].get<bool>()) << stages[i].dump();
  const auto gpus = nlohmann::json::parse(read_file(dir + "/report/gpu-health.json"))["gpus"];
  ASSERT_EQ(gpus.size(), 4u) << gpus.dump();
  for (const auto& gpu : gpus) EXPECT_EQ(gpu["index"], gpu["rank"]) << gpu.dump();

  const std::string junit = read_file(dir + "/junit.xml");
  const auto cases = gpu_stage_junit_cases(junit);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::map<std::string, std::string> failed, gpu_cases;
  size_t skipped_stages = 0;
  for (const auto& [name, status] : cases) {
    if (status == "failed") failed[name] = status;
    if (name.rfind("ddx.validate.gpu_health/", 0) == 0) gpu_cases[name] = status;
    if (name.rfind("ddx.validate/", 0) == 0 && status == "skipped") ++skipped_stages;
  }
  const std::string gh = "ddx.validate.gpu_health/" + std::string(host);
  EXPECT_EQ(failed, (std::map<std::string, std::string>{{"ddx.validate/gpu health", "failed"},
                                                         {gh + " gpu1 clocks", "failed"},
                                                         {gh + " gpu2 pcie", "failed"},
                                                         {gh + " gpu2 nvlink", "failed"},
                                                         {gh + " gpu3 ecc", "failed"}}))
      << junit;
  EXPECT_EQ(gpu_cases.size(), 32u) << junit;
  for (const char* warn : {" gpu0 ecc", " gpu0 temperature", " gpu1 row remapping"}) {
    EXPECT_EQ(gpu_cases[gh + warn], "passed") << warn << "\n" << junit;
  }
  EXPECT_EQ(skipped_stages, stages.size() - g - 1) << junit;
  EXPECT_TRUE(has(junit, " failures=\"5\" ")) << junit;
  EXPECT_TRUE(has(junit, "<failure message=\"NVIDIA H100 80GB HBM3 (fake) #3 (rank 3): 2 uncorrected ECC errors since the "
                         "driver loaded\">drain the node"))
      << junit;
}

// This CPU's model name as the probes report it (rank_probe.cpp: /proc/cpuinfo's first "model
// name", else "cpu"): the match string of an --expectations row for it.
std::string cpu_device_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  }
  return "cpu";
}

// --expectations with a row matching this CPU (no shipped row does): the compute stage reports
// every rank's figure as a fraction of the row's fp32 peak, in validate.json and its summary.
// The gpu health stage reads each rank's fake GPU (healthy) and passes. --expect 100GB/s, a floor
// no CPU link reaches, ends the run at the bandwidth stage: the figures are all this test reads.
TEST(Validate, AnExpectationsRowForThisCpuGivesEveryComputeFigureAsAFractionOfItsPeak) {
  const std::string dir = scratch_dir("validate", "cpu-expectations");
  const std::string cpu = cpu_device_name();
  const double peak = 2.0;
  const nlohmann::json rows = nlohmann::json::array(
      {{{"sku", "ddx test CPU"}, {"match", {cpu}}, {"peak_tflops", {{"fp32", peak}}}, {"source", "validate_test"}}});
  std::ofstream(dir + "/cpu.json") << rows.dump(2);
  auto argv = validate(dir + "/report");
  argv.insert(argv.end(), {"--expectations", dir + "/cpu.json", "--expect", "100GB/s"});
  RunResult r = run_in(dir, argv, fake_nvml_env("healthy"), 300);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir + "/report/validate.json"));
  const int skips = gpu_kernel_log_readable() ? 0 : 2;
  const auto& gpu = stage(report, "gpu health");
  EXPECT_TRUE(gpu["passed"].get<bool>()) << gpu.dump();
  const std::string counts = "gpu-health: 16 checks: " + std::to_string(16 - skips) + " PASS, 0 WARN, 0 FAIL, " +
                             std::to_string(skips) + " SKIP";
  EXPECT_EQ(gpu["summary"].get<std::string>().rfind(counts, 0), 0u) << counts << "\n" << gpu.dump();
  EXPECT_FALSE(stage(report, "bandwidth")["passed"].get<bool>()) << r.output;

  const auto& compute = stage(report, "compute");
  ASSERT_TRUE(compute["passed"].get<bool>()) << compute.dump();
  EXPECT_FALSE(compute["details"].contains("of_peak_note")) << compute.dump();
  const auto probe = nlohmann::json::parse(read_file(dir + "/report/compute.json"));
  ASSERT_EQ(probe["ranks"].size(), 2u) << probe.dump();
  std::map<std::string, double> measured;  // "<rank> <metric>" -> the probe's best trial
  for (const auto& rank : probe["ranks"]) {
    EXPECT_EQ(rank["device"], cpu) << rank.dump();
    for (const auto& [key, m] : rank["metrics"].items()) {
      measured[std::to_string(rank["rank"].get<int>()) + " " + key] = m["best"].get<double>();
    }
  }
  ASSERT_EQ(measured.size(), 6u) << probe.dump();  // 2 ranks x fp32 at n = 256, 512, 1024
  const auto& of_peak = compute["details"]["of_peak"];
  ASSERT_EQ(of_peak.size(), measured.size()) << compute.dump();
  const nlohmann::json* best = nullptr;
  for (const auto& f : of_peak) {
    const std::string key = std::to_string(f["rank"].get<int>()) + " " + f["metric"].get<std::string>();
    ASSERT_EQ(measured.count(key), 1u) << f.dump();
    EXPECT_EQ(f["sku"], "ddx test CPU") << f.dump();
    EXPECT_EQ(f["source"], "validate_test") << f.dump();
    EXPECT_EQ(f["peak"].get<double>(), peak) << f.dump();
    EXPECT_EQ(f["value"].get<double>(), measured[key]) << f.dump();
    EXPECT_DOUBLE_EQ(f["fraction"].get<double>(), measured[key] / peak) << f.dump();
    EXPECT_GT(f["fraction"].get<double>(), 0) << f.dump();
    if (!best || f["fraction"].get<double>() > (*best)["fraction"].get<double>()) best = &f;
  }
  char text[256];
  std::snprintf(text, sizeof text, "; best %s %.4g = %.0f%% of ddx test CPU's %.4g (validate_test)",
                (*best)["metric"].get<std::string>().c_str(), (*best)["value"].get<double>(),
                (*best)["fraction"].get<double>() * 100, peak);
  EXPECT_TRUE(has(compute["summary"].get<std::string>(), text)) << text << "\n" << compute.dump();
  EXPECT_TRUE(has(r.output, text)) << text << "\n" << r.output;
}

}  // namespace
}  // namespace ddx::testing
