// `ddx health fleet` (bin/ddx) on real `ddx health --level 2 --json` reports: six nodes' reports
// recorded on this VM (tests/fixtures/health-fleet/README.md), and today's report from a run of
// this build. One node's figure planted low is the only one named, in the drain list and the
// Markdown; six healthy nodes name nobody; an unreadable file is named while the others are still
// judged; a saved baseline judges a lone node; outputs that cannot be written and a bad baseline
// are refused before anything is read; nothing readable at all is UNKNOWN.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "process_helpers.h"
#include "health/health_check.h"

namespace ddx::testing {
namespace {

namespace fs = std::filesystem;
using health::Report;
using health::State;
using nlohmann::json;

const char* const kNodes[] = {"node-a", "node-b", "node-c", "node-d", "node-e", "node-f"};
constexpr int kTimeoutS = 60;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

Report read_report(const std::string& path) { return health::report_from_json(json::parse(read_file(path))); }

void write_report(const std::string& path, const Report& report) {
  std::ofstream(path) << health::to_json(report).dump(2) << "\n";
}

// The value of a report's judged metric, found by name and labels; the test fails without it.
health::Metric& metric_of(Report& report, const std::string& name, const std::map<std::string, std::string>& labels) {
  for (health::Check& check : report.checks) {
    for (health::Metric& metric : check.metrics) {
      if (metric.name == name && metric.labels == labels) return metric;
    }
  }
  throw std::runtime_error(report.host + " has no " + name);
}

// This VM's level 1 warns on every node alike (open files capped at 20000, no NTP daemon). A fleet
// of nodes that are healthy by their own account has those rows OK.
void clear_warnings(Report& report) {
  for (health::Check& check : report.checks) {
    if (check.state != State::Warn) continue;
    check.state = State::Ok;
    check.reason.clear();
    check.remediation.clear();
  }
}

class HealthFleet : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("health-fleet", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    reports_ = dir_ + "/reports";
    fs::create_directories(reports_);
    for (const char* node : kNodes) {
      fs::copy_file(std::string(DDX_SOURCE_DIR) + "/tests/fixtures/health-fleet/" + node + ".json",
                    reports_ + "/" + node + ".json");
    }
  }

  // Multiplies node-c's fp32 known-answer GEMM rate by `factor`.
  void plant_low(double factor) {
    Report c = read_report(reports_ + "/node-c.json");
    metric_of(c, "ddx_health_gemm_tflops", {{"device", "cpu"}, {"dtype", "fp32"}}).value *= factor;
    write_report(reports_ + "/node-c.json", c);
  }

  RunResult fleet(std::vector<std::string> args) {
    args.insert(args.begin(), {DDX_BIN, "health", "fleet"});
    return run_in(dir_, args, {}, kTimeoutS);
  }

  std::string dir_, reports_;
};

TEST_F(HealthFleet, ANodePlantedLowIsTheOnlyOneNamedInTheDrainListAndTheMarkdown) {
  plant_low(0.4);
  const RunResult r = fleet({reports_, "--drain-list", dir_ + "/drain.txt", "--markdown", dir_ + "/fleet.md", "--html",
                             dir_ + "/fleet.html", "--json", dir_ + "/fleet.json"});
  // Every node's own run warned (this VM's limits and clock): the fleet is WARN with or without it.
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(count_of(r.output, "\nLOW "), 1) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\nLOW +node-c: gemm_tflops cpu fp32 [0-9.e-]+ below its peers' "
                                                     "median [0-9.e-]+ \\(threshold [0-9.e-]+\\)\n")))
      << r.output;
  EXPECT_TRUE(has(last_line(r.output), "ddx health fleet: WARN: 6 nodes: 0 OK, 6 WARN, 0 CRITICAL, 0 UNKNOWN; drain 1: node-c"))
      << r.output;

  const std::string drain = read_file(dir_ + "/drain.txt");
  EXPECT_TRUE(std::regex_match(drain, std::regex("node-c ddx: low gemm_tflops cpu fp32 [0-9.e-]+ < [0-9.e-]+\n"))) << drain;

  const std::string md = read_file(dir_ + "/fleet.md");
  int rows = 0;
  for (const char* node : kNodes) {
    const std::regex row(std::string("\n\\| ") + node + " \\| WARN \\| Intel[^|]*\\|([^\n]*)\n");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(md, m, row)) << node << "\n" << md;
    ++rows;
    // The low figure is bold; only node-c has one, and its reason is the drain reason.
    EXPECT_EQ(has(m[1].str(), "**"), std::string(node) == "node-c") << m[0];
    if (std::string(node) == "node-c") EXPECT_TRUE(has(m[1].str(), "| ddx: low gemm_tflops cpu fp32 ")) << m[0];
  }
  EXPECT_EQ(rows, 6);
  const std::string html = read_file(dir_ + "/fleet.html");
  EXPECT_EQ(count_of(html, "class=\"num low\""), 1) << html;
  EXPECT_FALSE(has(html, "http") || has(html, "<script") || has(html, "src=")) << "self-contained, no network";
  const json j = json::parse(read_file(dir_ + "/fleet.json"));
  EXPECT_EQ(j["exit_code"], 1);
  for (const auto& node : j["nodes"]) {
    EXPECT_EQ(node["drain"].get<bool>(), node["node"] == "node-c") << node.dump();
    EXPECT_EQ(node["low"].size(), node["node"] == "node-c" ? 1u : 0u) << node.dump();
  }
}

TEST_F(HealthFleet, SixHealthyNodesNameNobody) {
  // As recorded: nobody low, nothing to drain; every node WARN by its own level 1 (this VM).
  RunResult r = fleet({reports_, "--drain-list", dir_ + "/drain.txt"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(has(r.output, "LOW ")) << r.output;
  EXPECT_EQ(last_line(r.output), "ddx health fleet: WARN: 6 nodes: 0 OK, 6 WARN, 0 CRITICAL, 0 UNKNOWN; nothing to drain");
  EXPECT_EQ(read_file(dir_ + "/drain.txt"), "");

  // Healthy by their own account too: exit 0.
  for (const char* node : kNodes) {
    Report report = read_report(reports_ + "/" + node + ".json");
    clear_warnings(report);
    write_report(reports_ + "/" + node + ".json", report);
  }
  r = fleet({reports_, "--drain-list", dir_ + "/drain.txt"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "LOW ")) << r.output;
  EXPECT_EQ(last_line(r.output), "ddx health fleet: OK: 6 nodes: 6 OK, 0 WARN, 0 CRITICAL, 0 UNKNOWN; nothing to drain");
  EXPECT_EQ(read_file(dir_ + "/drain.txt"), "");
}

TEST_F(HealthFleet, AnUnreadableFileIsNamedAndTheOthersAreStillJudged) {
  plant_low(0.4);
  std::ofstream(reports_ + "/node-g.json") << "{\"host\": \"node-g\", \"checks\": [";  // cut off mid-write
  std::ofstream(reports_ + "/validate.json") << "{\"stages\": []}\n";                 // another tool's JSON
  const RunResult r = fleet({reports_, dir_ + "/missing-folder"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "\nUNKNOWN   " + reports_ + "/node-g.json: not JSON\n")) << r.output;
  EXPECT_TRUE(has(r.output, "\nUNKNOWN   " + reports_ + "/validate.json: not a ddx health report: ")) << r.output;
  EXPECT_TRUE(has(r.output, "\nUNKNOWN   " + dir_ + "/missing-folder: no such file or folder\n")) << r.output;
  EXPECT_EQ(count_of(r.output, "\nLOW "), 1) << r.output;
  EXPECT_TRUE(has(r.output, "\nLOW       node-c: gemm_tflops cpu fp32 ")) << r.output;
  EXPECT_EQ(last_line(r.output), "ddx health fleet: UNKNOWN: 6 nodes and 3 unreadable files: 0 OK, 6 WARN, 0 CRITICAL, "
                                 "3 UNKNOWN; drain 1: node-c");
}

TEST_F(HealthFleet, ASavedBaselineJudgesALoneNodeAndABadOneIsRefusedNamingTheKey) {
  const RunResult save = fleet({reports_, "--save-baseline", dir_ + "/baseline/fleet.json"});
  EXPECT_EQ(save.exit_code, 1) << save.output;
  const json baseline = json::parse(read_file(dir_ + "/baseline/fleet.json"));
  EXPECT_EQ(baseline["format"], "ddx-health-baseline");
  const std::string model = read_report(reports_ + "/node-a.json").device_model;
  const std::string key = "ddx_health_gemm_tflops{device=\"cpu\",dtype=\"fp32\"}";
  EXPECT_EQ(baseline["models"][model][key]["count"], 6) << baseline.dump(2);

  // node-c alone, planted low: no peers, but the baseline knows the fleet.
  plant_low(0.4);
  fs::create_directories(dir_ + "/today");
  fs::copy_file(reports_ + "/node-c.json", dir_ + "/today/node-c.json");
  const RunResult alone = fleet({dir_ + "/today", "--baseline", dir_ + "/baseline/fleet.json"});
  EXPECT_EQ(alone.exit_code, 1) << alone.output;
  EXPECT_TRUE(has(alone.output, "judged against the baseline " + dir_ + "/baseline/fleet.json")) << alone.output;
  EXPECT_TRUE(std::regex_search(alone.output, std::regex("\nLOW +node-c: gemm_tflops cpu fp32 [0-9.e-]+ below the "
                                                         "baseline's median [0-9.e-]+ \\(threshold [0-9.e-]+\\)\n")))
      << alone.output;
  EXPECT_EQ(count_of(alone.output, "\nLOW "), 1) << alone.output;
  // Without it, one node has no peers: said, nobody named.
  const RunResult no_peers = fleet({dir_ + "/today"});
  EXPECT_FALSE(has(no_peers.output, "LOW ")) << no_peers.output;
  EXPECT_TRUE(has(no_peers.output, "note: " + model + ": 1 node, too few to judge against each other")) << no_peers.output;

  json bad = baseline;
  bad["models"][model][key]["median"] = "fast";
  std::ofstream(dir_ + "/bad.json") << bad.dump(2);
  const RunResult refused = fleet({reports_, "--baseline", dir_ + "/bad.json", "--drain-list", dir_ + "/drain.txt"});
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_EQ(refused.output, "ddx: error: --baseline " + dir_ + "/bad.json: model '" + model + "' figure '" + key +
                                "': \"median\" is missing or not a number\n");
  EXPECT_FALSE(fs::exists(dir_ + "/drain.txt"));
}

// One node's history (its daily reports in one folder) is its own baseline: every run counts, not
// only the newest, and `ddx health --baseline` judges today's run of that node against it.
TEST_F(HealthFleet, ANodesOwnHistoryIsItsOwnBaselineWithEveryRunCounted) {
  const Report a = read_report(reports_ + "/node-a.json");
  fs::create_directories(dir_ + "/history");
  // Five runs on five days, the fp32 GEMM rate 1.0, 1.1, 0.9, 1.05, 0.95 times node-a's.
  const double factors[] = {1.0, 1.1, 0.9, 1.05, 0.95};
  std::vector<double> rates;
  for (int day = 0; day < 5; ++day) {
    Report run = a;
    run.started = "2026-12-0" + std::to_string(day + 1) + "T06:00:00Z";
    health::Metric& rate = metric_of(run, "ddx_health_gemm_tflops", {{"device", "cpu"}, {"dtype", "fp32"}});
    rate.value *= factors[day];
    rates.push_back(rate.value);
    write_report(dir_ + "/history/node-a-day" + std::to_string(day + 1) + ".json", run);
  }
  const RunResult own = fleet({dir_ + "/history", "--save-baseline", dir_ + "/node-a-baseline.json"});
  EXPECT_TRUE(has(own.output, "baseline: node-a's own 5 runs, written to " + dir_ + "/node-a-baseline.json\n")) << own.output;
  const json baseline = json::parse(read_file(dir_ + "/node-a-baseline.json"));
  const json figure = baseline["models"][a.device_model]["ddx_health_gemm_tflops{device=\"cpu\",dtype=\"fp32\"}"];
  EXPECT_EQ(figure["count"], 5) << baseline.dump(2);
  EXPECT_DOUBLE_EQ(figure["median"].get<double>(), rates[0]) << baseline.dump(2);  // the middle of the five factors

  // The six nodes' newest runs make a fleet baseline of six, each node once.
  const RunResult fleet_wide = fleet({reports_, dir_ + "/history", "--save-baseline", dir_ + "/fleet-baseline.json"});
  EXPECT_TRUE(has(fleet_wide.output, "baseline: the newest run of each of 6 nodes, written to ")) << fleet_wide.output;
  EXPECT_EQ(json::parse(read_file(dir_ + "/fleet-baseline.json"))["models"][a.device_model]
                ["ddx_health_gemm_tflops{device=\"cpu\",dtype=\"fp32\"}"]["count"],
            6);

  // Today's node-a at half its usual rate, judged against its own history.
  Report today = a;
  today.started = "2026-12-07T06:00:00Z";
  metric_of(today, "ddx_health_gemm_tflops", {{"device", "cpu"}, {"dtype", "fp32"}}).value *= 0.5;
  fs::create_directories(dir_ + "/today");
  write_report(dir_ + "/today/node-a.json", today);
  const RunResult judged = fleet({dir_ + "/today", "--baseline", dir_ + "/node-a-baseline.json"});
  EXPECT_TRUE(std::regex_search(judged.output, std::regex("\nLOW +node-a: gemm_tflops cpu fp32 [0-9.e-]+ below the "
                                                          "baseline's median [0-9.e-]+ \\(threshold [0-9.e-]+\\)\n")))
      << judged.output;
}

// Reports with no judged figure (level 1, or runs on a busy node) make no baseline: an empty one
// would judge nothing and pass every node.
TEST_F(HealthFleet, NoJudgedFigureMakesNoBaseline) {
  for (const char* node : kNodes) {
    Report busy = read_report(reports_ + "/" + node + ".json");
    for (health::Check& check : busy.checks) {
      for (health::Metric& metric : check.metrics) metric.judged = false;
    }
    write_report(reports_ + "/" + node + ".json", busy);
  }
  // An earlier run's drain list: the view is still judged and its list written over it.
  std::ofstream(dir_ + "/drain.txt") << "node-e ddx: an earlier run's reason\n";
  const RunResult r = fleet({reports_, "--save-baseline", dir_ + "/baseline.json", "--drain-list", dir_ + "/drain.txt"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(last_line(r.output), "ddx health fleet: UNKNOWN: no baseline written to " + dir_ +
                                     "/baseline.json: none of the reports has a judged figure (level 1 measures none, "
                                     "and a run on a busy node judges none: see its \"other load\" row)");
  EXPECT_TRUE(has(r.output, "ddx health fleet: WARN: 6 nodes: 0 OK, 6 WARN, 0 CRITICAL, 0 UNKNOWN; nothing to drain\n"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/baseline.json"));
  EXPECT_EQ(read_file(dir_ + "/drain.txt"), "");
}

TEST_F(HealthFleet, OutputsThatCannotBeWrittenAreRefusedBeforeAnything) {
  plant_low(0.4);
  // A folder where the file must go, and a file where a folder must be.
  fs::create_directories(dir_ + "/a-folder");
  for (const std::string flag : {"--drain-list", "--markdown", "--html", "--json", "--save-baseline"}) {
    for (const std::string path : {dir_ + "/a-folder", reports_ + "/node-a.json/out.txt"}) {
      // The other outputs are good ones, so that the refusal is seen to come before any of them.
      std::vector<std::string> args = {reports_, flag, path};
      for (const auto& [good_flag, good_path] : std::vector<std::pair<std::string, std::string>>{
               {"--drain-list", "/drain.txt"}, {"--markdown", "/fleet.md"}, {"--save-baseline", "/baseline.json"}}) {
        if (good_flag != flag) args.insert(args.end(), {good_flag, dir_ + good_path});
      }
      const RunResult r = fleet(args);
      EXPECT_EQ(r.exit_code, 3) << flag << " " << path << "\n" << r.output;
      EXPECT_EQ(r.output.rfind("ddx: error: " + flag + " " + path + " cannot be written: ", 0), 0u) << flag << " " << path
                                                                                                 << "\n" << r.output;
      EXPECT_EQ(count_of(r.output, "\n"), 1) << "one line: " << r.output;
      for (const char* out : {"/drain.txt", "/fleet.md", "/baseline.json"}) {
        EXPECT_FALSE(fs::exists(dir_ + out)) << flag << " " << path << ": " << out << " written";
      }
    }
  }
}

TEST_F(HealthFleet, NothingReadableIsUnknownInOneLine) {
  fs::create_directories(dir_ + "/empty");
  RunResult r = fleet({dir_ + "/empty"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(r.output, "ddx health fleet: UNKNOWN: no report could be read: no .json file in " + dir_ + "/empty\n");
  std::ofstream(dir_ + "/empty/x.json") << "[1, 2";
  r = fleet({dir_ + "/empty", dir_ + "/nowhere"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(r.output, "ddx health fleet: UNKNOWN: no report could be read: " + dir_ + "/empty/x.json: not JSON (+1 more)\n");
}

// Today's report from this build's `ddx health --level 2` (so the fleet reads what ddx health
// writes now, not only the recorded files): six copies under six host names, one planted low.
TEST_F(HealthFleet, ThisBuildsOwnReportIsReadAndAPlantedCopyIsNamed) {
  const RunResult run = run_in(dir_, {DDX_BIN, "health", "--level", "2", "--device", "cpu", "--json", dir_ + "/today.json"},
                               {}, 240);
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 1) << run.output;  // OK, or WARN for this VM's limits
  Report today = read_report(dir_ + "/today.json");
  // Run beside other tests, today's run may have found the node busy (its "other load" row) and
  // left its figures unjudged; the copies stand for six quiet nodes, whose memory figures are
  // judged as ddx health marks them on a quiet node.
  for (health::Check& check : today.checks) {
    for (health::Metric& metric : check.metrics) {
      if (metric.name == "ddx_health_memory_gbps") metric.judged = true;
    }
  }
  fs::create_directories(dir_ + "/copies");
  for (const char* node : kNodes) {
    Report copy = today;
    copy.host = node;
    if (copy.host == "node-e") metric_of(copy, "ddx_health_memory_gbps", {{"device", "cpu"}, {"kernel", "host_triad"}}).value *= 0.4;
    write_report(dir_ + "/copies/" + node + ".json", copy);
  }
  const RunResult r = fleet({dir_ + "/copies", "--drain-list", dir_ + "/drain.txt"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(count_of(r.output, "\nLOW "), 1) << r.output;
  EXPECT_TRUE(has(r.output, "\nLOW       node-e: memory_gbps cpu host_triad ")) << r.output;
  EXPECT_TRUE(std::regex_match(read_file(dir_ + "/drain.txt"), std::regex("node-e ddx: low memory_gbps cpu host_triad [^\n]+\n")))
      << read_file(dir_ + "/drain.txt");
}

}  // namespace
}  // namespace ddx::testing
