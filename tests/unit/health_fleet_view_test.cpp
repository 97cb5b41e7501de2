// The fleet view of `ddx health` (probes/health/fleet.h) on reports built in memory and files in a
// scratch folder: a node planted low among six is the only one named, six healthy nodes name
// nobody, too few peers are said to be too few, CRITICAL and UNKNOWN nodes are named (only the
// first drained), a saved baseline judges a lone node, the newest report of a host counts and an
// unreadable file is named while the others are judged.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "health/fleet.h"

namespace ddx::health {
namespace {

constexpr const char* kCpu = "Intel(R) Xeon(R) Processor";

// `ddx probe compute --json` on this 2-core VM with a build running beside it: fp32 TFLOP/s of
// n = 256, 512, 1024, one trial per node (the spread a fleet of identical nodes shows).
const double kTrials[3][6] = {{0.003103, 0.002919, 0.002903, 0.003126, 0.003007, 0.003237},
                              {0.02459, 0.02470, 0.02015, 0.02499, 0.02245, 0.02405},
                              {0.06590, 0.07189, 0.06747, 0.06718, 0.07662, 0.07168}};
const int kSizes[3] = {256, 512, 1024};

Metric gemm(int size, double tflops) {
  return {"ddx_health_gemm_tflops", tflops, {{"device", "cpu"}, {"dtype", "fp32"}, {"n", std::to_string(size)}}, true};
}

Report node(const std::string& host, int trial, State state = State::Ok, const std::string& reason = "") {
  Report r;
  r.host = host;
  r.level = 2;
  r.device_model = kCpu;
  r.started = "2025-03-04T05:06:07Z";
  Check check;
  check.name = "gemm cpu fp32";
  check.state = state;
  check.value = state == State::Ok ? "exact" : "wrong";
  check.reason = reason;
  for (int s = 0; s < 3; ++s) check.metrics.push_back(gemm(kSizes[s], kTrials[s][trial]));
  r.checks.push_back(check);
  return r;
}

FleetInput six_nodes() {
  FleetInput input;
  for (int i = 0; i < 6; ++i) {
    input.reports.push_back(node("node-" + std::string(1, static_cast<char>('a' + i)), i));
    input.files.push_back("/shared/health/node-" + std::string(1, static_cast<char>('a' + i)) + ".json");
  }
  return input;
}

const FleetNode& named(const FleetView& view, const std::string& name) {
  for (const FleetNode& n : view.nodes) {
    if (n.name == name) return n;
  }
  throw std::runtime_error("no node " + name);
}

TEST(HealthFleetView, SixHealthyNodesNameNobody) {
  const FleetView view = judge_fleet(six_nodes(), nullptr);
  ASSERT_EQ(view.nodes.size(), 6u);
  for (const FleetNode& n : view.nodes) {
    EXPECT_TRUE(n.low.empty()) << n.name;
    EXPECT_EQ(n.state, State::Ok) << n.name;
    EXPECT_FALSE(n.drain) << n.name;
  }
  EXPECT_TRUE(view.notes.empty());
  EXPECT_EQ(fleet_exit_code(view), 0);
  EXPECT_EQ(fleet_drain_list(view), "");
  EXPECT_EQ(fleet_verdict_line(view), "ddx health fleet: OK: 6 nodes: 6 OK, 0 WARN, 0 CRITICAL, 0 UNKNOWN; nothing to drain");
}

TEST(HealthFleetView, TheNodePlantedLowIsTheOnlyOneNamed) {
  FleetInput input = six_nodes();
  input.reports[2].checks[0].metrics[2].value *= 0.5;  // node-c, n=1024: 0.0337
  const FleetView view = judge_fleet(input, nullptr);
  for (const FleetNode& n : view.nodes) {
    if (n.name == "node-c") continue;
    EXPECT_TRUE(n.low.empty()) << n.name;
    EXPECT_EQ(n.state, State::Ok) << n.name;
  }
  const FleetNode& c = named(view, "node-c");
  ASSERT_EQ(c.low.size(), 1u);
  EXPECT_EQ(metric_key(c.low[0].metric), "ddx_health_gemm_tflops{device=\"cpu\",dtype=\"fp32\",n=\"1024\"}");
  // The median of the five others: 0.06590 0.06718 0.07168 0.07189 0.07662.
  EXPECT_DOUBLE_EQ(c.low[0].median, 0.07168);
  EXPECT_EQ(c.state, State::Warn);
  EXPECT_EQ(c.own, State::Ok);
  EXPECT_TRUE(c.drain);
  EXPECT_EQ(c.reason, "ddx: low gemm_tflops cpu fp32 1024 0.0337 < 0.0517");
  EXPECT_EQ(fleet_exit_code(view), 1);
  EXPECT_EQ(fleet_drain_list(view), "node-c ddx: low gemm_tflops cpu fp32 1024 0.0337 < 0.0517\n");
  const std::string console = format_fleet_console(view);
  EXPECT_NE(console.find("LOW       node-c: gemm_tflops cpu fp32 1024 0.03374 below its peers' median 0.07168 "
                         "(threshold 0.05166)\n"),
            std::string::npos)
      << console;
  EXPECT_EQ(console.substr(console.rfind('\n', console.size() - 2) + 1),
            "ddx health fleet: WARN: 6 nodes: 5 OK, 1 WARN, 0 CRITICAL, 0 UNKNOWN; drain 1: node-c\n");
  const std::string md = fleet_markdown(view);
  EXPECT_NE(md.find("| node-c | WARN | Intel(R) Xeon(R) Processor | 0.002903 | 0.02015 | **0.03374** (< 0.05166) | "
                    "ddx: low gemm_tflops cpu fp32 1024 0.0337 < 0.0517 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| node-b | OK | Intel(R) Xeon(R) Processor | 0.002919 | 0.0247 | 0.07189 |  |"), std::string::npos) << md;
  const std::string html = fleet_html(view);
  EXPECT_NE(html.find("<td class=\"num low\">0.03374 (&lt; 0.05166)</td>"), std::string::npos) << html;
  EXPECT_EQ(html.find("http"), std::string::npos) << "self-contained";
}

TEST(HealthFleetView, TooFewPeersAreSaidToBeTooFewAndNobodyIsNamed) {
  FleetInput input = six_nodes();
  input.reports.resize(2);
  input.files.resize(2);
  input.reports[1].checks[0].metrics[2].value *= 0.3;
  const FleetView view = judge_fleet(input, nullptr);
  for (const FleetNode& n : view.nodes) EXPECT_TRUE(n.low.empty()) << n.name;
  ASSERT_EQ(view.notes.size(), 1u);
  EXPECT_EQ(view.notes[0], std::string(kCpu) + ": 2 nodes, too few to judge against each other (3 or more, or --baseline)");
  EXPECT_EQ(fleet_exit_code(view), 0);
}

TEST(HealthFleetView, CriticalNodesAreDrainedWithTheirReasonUnknownOnesNever) {
  FleetInput input = six_nodes();
  input.reports[3] = node("node-d", 3, State::Critical, "gemm cpu fp32 wrong at (5,17)");
  input.reports[4] = node("node-e", 4, State::Unknown);
  input.reports[4].checks[0].metrics[2].value *= 0.5;  // low, but its run could not check itself
  input.unreadable.push_back({"/shared/health/node-x.json", "not JSON"});
  const FleetView view = judge_fleet(input, nullptr);
  const FleetNode& d = named(view, "node-d");
  EXPECT_EQ(d.state, State::Critical);
  EXPECT_TRUE(d.drain);
  EXPECT_EQ(d.reason, "ddx: gemm cpu fp32 wrong at (5,17)");
  const FleetNode& e = named(view, "node-e");
  EXPECT_EQ(e.state, State::Unknown);
  EXPECT_EQ(e.low.size(), 1u) << "its low figure is still named";
  EXPECT_FALSE(e.drain);
  EXPECT_EQ(e.reason, "its run could not check gemm cpu fp32: wrong");
  const FleetNode& x = named(view, "/shared/health/node-x.json");
  EXPECT_FALSE(x.readable);
  EXPECT_EQ(x.state, State::Unknown);
  EXPECT_EQ(x.reason, "not JSON");
  EXPECT_FALSE(x.drain);
  EXPECT_EQ(fleet_exit_code(view), 2) << "CRITICAL over UNKNOWN";
  EXPECT_EQ(fleet_drain_list(view), "node-d ddx: gemm cpu fp32 wrong at (5,17)\n");
  const std::string console = format_fleet_console(view);
  EXPECT_NE(console.find("CRITICAL  node-d: ddx: gemm cpu fp32 wrong at (5,17)\n"), std::string::npos) << console;
  EXPECT_NE(console.find("UNKNOWN   /shared/health/node-x.json: not JSON\n"), std::string::npos) << console;
  EXPECT_NE(console.find("ddx health fleet: CRITICAL: 6 nodes and 1 unreadable file: 4 OK, 0 WARN, 1 CRITICAL, 2 UNKNOWN; "
                         "drain 1: node-d\n"),
            std::string::npos)
      << console;
}

TEST(HealthFleetView, ASavedBaselineJudgesALoneNode) {
  const Baseline baseline = build_baseline(six_nodes().reports);
  FleetInput alone;
  alone.reports.push_back(node("node-q", 0));
  alone.reports[0].checks[0].metrics[1].value = 0.010;  // n=512 at 40 % of the fleet's
  alone.files.push_back("q.json");
  const FleetView view = judge_fleet(alone, &baseline, "fleet.json");
  EXPECT_EQ(view.judged_against, "the baseline fleet.json");
  ASSERT_EQ(view.nodes[0].low.size(), 1u);
  EXPECT_EQ(metric_label(view.nodes[0].low[0].metric), "gemm_tflops cpu fp32 512");
  EXPECT_TRUE(view.notes.empty());
  // A model the baseline does not know is said, not judged.
  alone.reports[0].device_model = "AMD EPYC 9654";
  const FleetView unknown_model = judge_fleet(alone, &baseline, "fleet.json");
  EXPECT_TRUE(unknown_model.nodes[0].low.empty());
  ASSERT_EQ(unknown_model.notes.size(), 1u);
  EXPECT_EQ(unknown_model.notes[0], "AMD EPYC 9654: 1 node, a model the baseline does not know: not judged");
}

TEST(HealthFleetView, FilesTheNewestReportOfAHostCountsAndAnUnreadableFileIsNamed) {
  const std::string dir = ::testing::TempDir() + "/health_fleet_view_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/older");
  auto write = [](const std::string& path, const std::string& text) { std::ofstream(path) << text; };
  const FleetInput six = six_nodes();
  for (const Report& r : six.reports) write(dir + "/" + r.host + ".json", to_json(r).dump());
  Report old = node("node-a", 0);
  old.started = "2025-03-03T05:06:07Z";
  old.checks[0].metrics[0].value = 1e-6;  // would be low, but a newer report of node-a exists
  write(dir + "/older/node-a.json", to_json(old).dump());
  write(dir + "/broken.json", "{\"host\": ");
  write(dir + "/notes.txt", "not a .json file: not read");
  write(dir + "/baseline.json", baseline_to_json(build_baseline(six.reports)).dump());

  const FleetInput input = read_fleet({dir, dir + "/missing.json"});
  ASSERT_EQ(input.reports.size(), 6u);
  EXPECT_EQ(input.reports[0].host, "node-a");
  EXPECT_EQ(input.reports[0].started, "2025-03-04T05:06:07Z");
  EXPECT_EQ(input.older, 1);
  EXPECT_EQ(input.not_reports, 1);
  ASSERT_EQ(input.unreadable.size(), 2u);
  EXPECT_EQ(input.unreadable[0].path, dir + "/broken.json");
  EXPECT_EQ(input.unreadable[0].why, "not JSON");
  EXPECT_EQ(input.unreadable[1].path, dir + "/missing.json");
  EXPECT_EQ(input.unreadable[1].why, "no such file or folder");
  const FleetView view = judge_fleet(input, nullptr);
  for (const FleetNode& n : view.nodes) EXPECT_TRUE(n.low.empty()) << n.name;
  EXPECT_EQ(fleet_exit_code(view), 3);

  // A report without a host, and a baseline given by name instead of a folder.
  Report nameless = node("", 0);
  write(dir + "/nameless.json", to_json(nameless).dump());
  const FleetInput named_files = read_fleet({dir + "/nameless.json", dir + "/baseline.json"});
  ASSERT_EQ(named_files.unreadable.size(), 2u);
  EXPECT_EQ(named_files.unreadable[0].why, "not a ddx health report: its \"host\" is empty");
  EXPECT_EQ(named_files.unreadable[1].why, "a ddx-health-baseline file, not a node's report (give it with --baseline)");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ddx::health
