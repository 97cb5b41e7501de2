// `ddx health` as an operator and a SLURM node run it (bin/ddx): level 1 on this machine is OK or
// WARN with the verdict last; --json and --prometheus are written and read back by the JSON
// parser and a node_exporter-strict textfile parser; the fake NVML's planted faults and a missing
// --path are CRITICAL (exit 2) with a drain reason naming them; bad input is one line and exit 3
// (never 2: that would drain the node) and leaves an earlier --json as it was; --slurm-drain and
// --slurm-resume through a fake scontrol print their line and put it in the JSON, and a SLURM
// that cannot be asked makes a healthy run UNKNOWN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "fake_scontrol/fake_scontrol.h"
#include "health/health_check.h"
#include "process_helpers.h"
#include "unit/prometheus_textfile.h"

namespace ddx::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::string last_line(const std::string& output) {
  const auto lines = lines_of(output);
  return lines.empty() ? "" : lines.back();
}

// No GPU for the run whatever this machine has, so what is planted decides the state.
std::map<std::string, std::string> no_gpu(const std::string& dir) { return {{"DDX_NVML_LIBRARY", dir + "/no-libnvidia-ml.so.1"}}; }
std::map<std::string, std::string> fake_nvml(const std::string& scenario) {
  return {{"DDX_NVML_LIBRARY", FAKE_NVML}, {"FAKE_NVML_SCENARIO", scenario}};
}

RunResult health(const std::string& dir, std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), {DDX_BIN, "health"});
  return run_in(dir, args, env, 120);
}

json read_json(const std::string& path) {
  const std::string text = read_file(path);
  EXPECT_FALSE(text.empty()) << path << " was not written";
  return json::parse(text.empty() ? "{}" : text);
}

TEST(Health, Level1OnThisMachineIsOkOrWarnWithTheVerdictLast) {
  const std::string dir = scratch_dir("health", "level1");
  const RunResult r = health(dir, {});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;
  const std::string verdict = last_line(r.output);
  EXPECT_TRUE(std::regex_search(verdict, std::regex(R"(^ddx health: (OK|WARN) on \S+ \(level 1, [0-9.]+ s\): )"))) << verdict;
  EXPECT_TRUE(has(r.output, "check ")) << "no table:\n" << r.output;
}

TEST(Health, JsonAndPrometheusAreWrittenAndReadBack) {
  const std::string dir = scratch_dir("health", "outputs");
  // Into folders that do not exist yet: created, as every ddx output.
  const std::string json_path = dir + "/reports/node.json", prom_path = dir + "/textfile/ddx_health.prom";
  const RunResult r = health(dir, {"--json", json_path, "--prometheus", prom_path, "--path", dir}, no_gpu(dir));
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;

  const json j = read_json(json_path);
  const health::Report report = health::report_from_json(j);
  EXPECT_EQ(health::exit_code(report), r.exit_code);
  EXPECT_EQ(j["exit_code"], r.exit_code);
  EXPECT_EQ(j["verdict"], last_line(r.output));
  EXPECT_EQ(report.level, 1);
  EXPECT_FALSE(report.host.empty());
  EXPECT_TRUE(std::regex_match(report.started, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << report.started;
  ASSERT_FALSE(report.checks.empty());
  bool path_row = false;
  for (const auto& c : report.checks) path_row = path_row || has(c.name, dir);
  EXPECT_TRUE(path_row) << "no row for --path " << dir;

  const std::vector<Sample> samples = parse_textfile(read_file(prom_path));
  const auto states = named(samples, "ddx_health_check_state");
  EXPECT_EQ(states.size(), report.checks.size());
  for (const auto& s : samples) EXPECT_EQ(s.labels.at("host"), report.host) << s.name;
  const auto overall = named(samples, "ddx_health_state");
  ASSERT_EQ(overall.size(), 1u);
  EXPECT_EQ(overall[0].value, std::to_string(r.exit_code));
  EXPECT_EQ(named(samples, "ddx_health_start_time_seconds").size(), 1u);
  EXPECT_EQ(named(samples, "ddx_health_path_free_bytes").size(), 1u);
}

// NVML lists four GPUs (the fake) and CUDA sees none (this machine has no GPU): level 2 must not
// pass on the CPU as if the node had none. UNKNOWN, saying why; no CPU figure filed under the
// GPU model. --node names the report's host on its own.
TEST(Health, GpusThatCudaCannotSeeAreUnknownNotTestedOnTheCpu) {
  const std::string dir = scratch_dir("health", "gpus-cuda-cannot-see");
  // The case is a GPU node whose GPUs CUDA cannot see: on a machine where CUDA does see a real
  // GPU it cannot be made (CI and this VM have none), and the GPU check covers that machine.
  if (std::getenv("CUDA_VISIBLE_DEVICES") == nullptr && fs::exists("/dev/nvidia0")) GTEST_SKIP() << "a real GPU is here";
  const RunResult r = health(dir, {"--level", "2", "--node", "node-g", "--json", dir + "/h.json"}, fake_nvml("healthy"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  const json j = read_json(dir + "/h.json");
  EXPECT_EQ(j["host"], "node-g");
  bool found = false;
  for (const json& c : j["checks"]) {
    const std::string name = c.value("name", "");
    EXPECT_NE(name.rfind("gemm ", 0), 0u) << "a GEMM ran on the CPU: " << name;
    EXPECT_NE(name.rfind("compute ", 0), 0u) << name;
    if (name != "gpus for kernels") continue;
    found = true;
    EXPECT_EQ(c.value("state", ""), "UNKNOWN");
    EXPECT_EQ(c.value("value", "").rfind("4 GPUs listed by NVML, none visible to CUDA (CUDA_VISIBLE_DEVICES ", 0), 0u)
        << c.dump();
  }
  EXPECT_TRUE(found) << r.output;
  EXPECT_TRUE(has(last_line(r.output), "ddx health: UNKNOWN on node-g (level 2, ")) << r.output;
}

TEST(Health, FakeNvmlFaultsAreCriticalWithADrainReasonNamingTheGpu) {
  const std::string dir = scratch_dir("health", "nvml-faults");
  const RunResult r = health(dir, {"--json", dir + "/h.json"}, fake_nvml("faults"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(last_line(r.output).rfind("ddx health: CRITICAL on ", 0), 0u) << r.output;
  const json j = read_json(dir + "/h.json");
  const std::string reason = j["drain_reason"];
  EXPECT_TRUE(std::regex_search(reason, std::regex(R"(^ddx: gpu\d )"))) << reason;
  EXPECT_LE(reason.size(), 120u);
  // The same box without faults is not CRITICAL: the fake NVML's faults, not the machine, drain it.
  const RunResult healthy = health(dir, {}, fake_nvml("healthy"));
  EXPECT_TRUE(healthy.exit_code == 0 || healthy.exit_code == 1) << healthy.output;
}

TEST(Health, AMissingPathIsCriticalAndNamed) {
  const std::string dir = scratch_dir("health", "missing-path");
  const std::string gone = dir + "/scratch-not-mounted";
  const RunResult r = health(dir, {"--path", gone, "--json", dir + "/h.json"}, no_gpu(dir));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(last_line(r.output), gone)) << r.output;
  const std::string reason = read_json(dir + "/h.json")["drain_reason"];
  EXPECT_EQ(reason, "ddx: missing " + gone) << reason;  // what is wrong first: plain `sinfo -R` shows 20 characters
}

TEST(Health, BadInputIsOneLineNamingTheFlagAndExitsUnknownNotCritical) {
  const std::string dir = scratch_dir("health", "bad-input");
  const std::string not_json = dir + "/baseline.json";
  std::ofstream(not_json) << "not json";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus"}, "--bogus"},
      {{"--level", "4"}, "--level"},
      {{"--device", "tpu"}, "--device"},
      {{"--local-ranks", "-1"}, "--local-ranks"},
      {{"--node", "node one"}, "--node"},
      {{"--json", dir}, "--json"},
      {{"--prometheus", not_json + "/x.prom"}, "--prometheus"},
      {{"--baseline", not_json}, "--baseline"},
      {{"--baseline", dir + "/none.json"}, "--baseline"},
  };
  for (const auto& [args, flag] : cases) {
    const RunResult r = health(dir, args, no_gpu(dir));
    EXPECT_EQ(r.exit_code, 3) << args[0] << ":\n" << r.output;
    const auto lines = lines_of(r.output);
    ASSERT_EQ(lines.size(), 1u) << args[0] << ":\n" << r.output;
    EXPECT_EQ(lines[0].rfind("ddx: error: ", 0), 0u) << lines[0];
    EXPECT_TRUE(has(lines[0], flag)) << lines[0];
  }
}

TEST(Health, AnEarlierJsonIsKeptWhenARunStopsOnBadInput) {
  const std::string dir = scratch_dir("health", "keep-json");
  const std::string path = dir + "/h.json";
  const RunResult first = health(dir, {"--json", path}, no_gpu(dir));
  ASSERT_TRUE(first.exit_code == 0 || first.exit_code == 1) << first.output;
  const std::string before = read_file(path);
  ASSERT_FALSE(before.empty());
  std::ofstream(dir + "/a-file") << "x";
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--level", "9"},
                                              std::vector<std::string>{"--prometheus", dir + "/a-file/h.prom"}}) {
    std::vector<std::string> args = {"--json", path, "--path", dir + "/missing"};
    args.insert(args.end(), bad.begin(), bad.end());
    const RunResult r = health(dir, args, no_gpu(dir));
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_EQ(read_file(path), before) << bad[0] << " replaced the earlier --json";
  }
}

TEST(Health, SlurmDrainAndResumeArePrintedAndInTheJson) {
  const std::string dir = scratch_dir("health", "slurm-fake");
  FakeScontrolOnPath scontrol(dir);
  scontrol.plant("node-b", "IDLE", "");
  RunResult r = health(dir, {"--slurm-drain", "--slurm-resume", "--node", "node-b", "--json", dir + "/h.json"},
                       fake_nvml("faults"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  json j = read_json(dir + "/h.json");
  const std::string reason = j["drain_reason"];
  EXPECT_EQ(j["slurm"]["drain"]["line"], "slurm: drained node-b: " + reason);
  EXPECT_EQ(j["slurm"]["drain"]["acted"], true);
  EXPECT_EQ(j["slurm"]["resume"]["line"], "slurm: node-b not resumed (CRITICAL)");
  EXPECT_TRUE(has(r.output, "slurm: drained node-b: " + reason + "\n")) << r.output;
  ASSERT_FALSE(scontrol.calls().empty());
  EXPECT_EQ(scontrol.calls().back(), "update nodename=node-b state=drain reason=" + reason);

  // The fault cleared: the node drained by ddx comes back.
  scontrol.plant("node-b", "IDLE+DRAIN", reason);
  r = health(dir, {"--slurm-drain", "--slurm-resume", "--node", "node-b", "--json", dir + "/h.json"}, no_gpu(dir));
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;
  j = read_json(dir + "/h.json");
  EXPECT_EQ(j["slurm"]["resume"]["acted"], true) << j["slurm"].dump();
  EXPECT_EQ(scontrol.calls().back(), "update nodename=node-b state=resume");
  EXPECT_EQ(last_line(r.output).rfind("ddx health: ", 0), 0u) << r.output;
}

TEST(Health, ASlurmThatCannotBeAskedMakesAHealthyRunUnknown) {
  const std::string dir = scratch_dir("health", "slurm-fails");
  FakeScontrolOnPath scontrol(dir);
  scontrol.write("show_exit", "1");
  scontrol.write("node", "slurm_load_node error: Unable to contact slurm controller (connect failure)\n");
  const RunResult r = health(dir, {"--slurm-resume", "--node", "node-b", "--json", dir + "/h.json"}, no_gpu(dir));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  const json j = read_json(dir + "/h.json");
  EXPECT_EQ(j["state"], "UNKNOWN");
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(slurm resume\s+UNKNOWN\s+slurm: cannot resume node-b: .*Unable to contact)")))
      << r.output;
  EXPECT_EQ(j["slurm"]["resume"]["failed"], true);
}

}  // namespace
}  // namespace ddx::testing
