// Baselines of `ddx health` (probes/health/baseline.h): the key of a figure, a baseline built from
// many reports (median and MAD per device model and figure) saved and read back, a node's figures
// judged against it with the node probes' margins (0.25 on CPU, 0.10 on GPU), and a bad baseline
// file refused with the key at fault named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddx/errors/errors.h"
#include "health/baseline.h"

namespace ddx::health {
namespace {

constexpr const char* kCpu = "Intel(R) Xeon(R) Processor";
constexpr const char* kGpu = "NVIDIA H100 80GB HBM3";

Metric gemm(const std::string& device, double tflops) {
  return {"ddx_health_gemm_tflops", tflops, {{"device", device}, {"dtype", device == "cpu" ? "fp32" : "bf16"}}, true};
}

// A level-2 report of `host` with one check measuring `metrics`, plus a figure nobody judges.
Report report_of(const std::string& host, const std::string& model, std::vector<Metric> metrics) {
  Report r;
  r.host = host;
  r.level = 2;
  r.device_model = model;
  r.started = "2025-03-04T05:06:07Z";
  Check check;
  check.name = "gemm";
  check.metrics = std::move(metrics);
  check.metrics.push_back({"ddx_health_gemm_seconds", 4.2, {{"device", "cpu"}}, false});
  r.checks.push_back(check);
  return r;
}

const std::string kCpuKey = "ddx_health_gemm_tflops{device=\"cpu\",dtype=\"fp32\"}";
const std::string kGpuKey = "ddx_health_gemm_tflops{device=\"gpu0\",dtype=\"bf16\"}";

// Figures of `ddx probe compute` fp32 n=1024 on this 2-core VM (TFLOP/s, one trial per node).
std::vector<Report> five_cpu_nodes() {
  const double tflops[] = {0.0766, 0.0719, 0.0675, 0.0672, 0.0717};
  std::vector<Report> reports;
  for (int i = 0; i < 5; ++i) reports.push_back(report_of("node-" + std::to_string(i), kCpu, {gemm("cpu", tflops[i])}));
  return reports;
}

TEST(HealthBaseline, AFiguresKeyIsItsNameAndLabelsWithoutTheHost) {
  Metric m = gemm("gpu0", 700);
  m.labels["host"] = "node-a";
  EXPECT_EQ(metric_key(m), kGpuKey);
  EXPECT_EQ(metric_label(m), "gemm_tflops gpu0 bf16");
  EXPECT_EQ(metric_key({"ddx_health_up", 1, {}, false}), "ddx_health_up");
}

TEST(HealthBaseline, BuiltFromReportsSavedAndReadBackTheSame) {
  std::vector<Report> reports = five_cpu_nodes();
  // A key a report repeats counts once (its first); another model is a baseline of its own.
  reports[0].checks[0].metrics.push_back(gemm("cpu", 5.0));
  reports.push_back(report_of("gpu-node", kGpu, {gemm("gpu0", 712.5)}));
  const Baseline built = build_baseline(reports);

  ASSERT_EQ(built.models.size(), 2u);
  ASSERT_EQ(built.models.at(kCpu).size(), 1u) << "the figure nobody judges is left out";
  const BaselineFigure& cpu = built.models.at(kCpu).at(kCpuKey);
  EXPECT_DOUBLE_EQ(cpu.median, 0.0717);
  // |x - 0.0717|: 0.0049, 0.0002, 0.0042, 0.0045, 0 -> median 0.0042
  EXPECT_NEAR(cpu.mad, 0.0042, 1e-12);
  EXPECT_EQ(cpu.count, 5);
  EXPECT_DOUBLE_EQ(built.models.at(kGpu).at(kGpuKey).median, 712.5);
  EXPECT_EQ(built.models.at(kGpu).at(kGpuKey).count, 1);

  const nlohmann::json saved = baseline_to_json(built);
  const Baseline read = baseline_from_json(nlohmann::json::parse(saved.dump()));
  ASSERT_EQ(read.models.size(), built.models.size());
  for (const auto& [model, figures] : built.models) {
    ASSERT_EQ(read.models.at(model).size(), figures.size()) << model;
    for (const auto& [key, f] : figures) {
      const BaselineFigure& r = read.models.at(model).at(key);
      EXPECT_DOUBLE_EQ(r.median, f.median) << key;
      EXPECT_DOUBLE_EQ(r.mad, f.mad) << key;
      EXPECT_EQ(r.count, f.count) << key;
    }
  }
}

TEST(HealthBaseline, ALowFigureIsWarnedANormalOneIsNot) {
  const Baseline baseline = build_baseline(five_cpu_nodes());
  // CPU: 0.0717 - max(0.25 x 0.0717, 3 x 1.4826 x 0.0042) = 0.0717 - 0.01868 = 0.05302
  const double threshold = 0.0717 - 3 * 1.4826 * 0.0042;

  const auto low = judge_against_baseline(report_of("node-x", kCpu, {gemm("cpu", 0.0301)}), baseline);
  ASSERT_EQ(low.size(), 1u);
  EXPECT_EQ(low[0].name, kCpuKey);
  EXPECT_EQ(low[0].state, State::Warn);
  EXPECT_EQ(low[0].value, "0.0301 below the baseline's median 0.0717 (threshold 0.05302)");
  EXPECT_EQ(low[0].reason, "low gemm_tflops cpu fp32 0.0301 < 0.053");
  EXPECT_FALSE(low[0].remediation.empty());

  const auto normal = judge_against_baseline(report_of("node-y", kCpu, {gemm("cpu", 0.0659)}), baseline);
  ASSERT_EQ(normal.size(), 1u);
  EXPECT_EQ(normal[0].state, State::Ok) << normal[0].value;
  EXPECT_TRUE(normal[0].reason.empty());

  // Just either side of the threshold.
  EXPECT_EQ(judge_figures(report_of("a", kCpu, {gemm("cpu", threshold * 0.999)}), baseline).at(0).low, true);
  EXPECT_EQ(judge_figures(report_of("b", kCpu, {gemm("cpu", threshold * 1.001)}), baseline).at(0).low, false);
}

TEST(HealthBaseline, GpuFiguresAreHeldToTenPercentCpuFiguresToTwentyFive) {
  // Five GPU nodes with the same figure: no spread, the margin decides.
  std::vector<Report> fleet;
  for (int i = 0; i < 5; ++i) fleet.push_back(report_of("g" + std::to_string(i), kGpu, {gemm("gpu0", 700)}));
  for (int i = 0; i < 5; ++i) fleet.push_back(report_of("c" + std::to_string(i), kCpu, {gemm("cpu", 0.07)}));
  const Baseline baseline = build_baseline(fleet);
  EXPECT_DOUBLE_EQ(rule_for(gemm("gpu0", 1)).margin, 0.10);
  EXPECT_DOUBLE_EQ(rule_for(gemm("cuda:1", 1)).margin, 0.10);
  EXPECT_DOUBLE_EQ(rule_for(gemm("cpu", 1)).margin, 0.25);
  EXPECT_DOUBLE_EQ(rule_for({"ddx_health_storage_write_mbps", 1, {{"path", "/scratch"}}, true}).margin, 0.25);
  EXPECT_DOUBLE_EQ(rule_for({"ddx_health_link_gbps", 1, {{"a", "gpu0"}, {"b", "gpu1"}}, true}).margin, 0.10);
  EXPECT_DOUBLE_EQ(rule_for({"ddx_health_allreduce_busbw_gbps", 1, {{"engine", "nccl"}, {"ranks", "8"}}, true}).margin, 0.10);
  EXPECT_DOUBLE_EQ(rule_for({"ddx_health_allreduce_busbw_gbps", 1, {{"engine", "gloo"}, {"ranks", "2"}}, true}).margin, 0.25);
  // 15 % low: WARN on a GPU (below 630), not on a CPU (above 0.0525).
  EXPECT_TRUE(judge_figures(report_of("g9", kGpu, {gemm("gpu0", 595)}), baseline).at(0).low);
  EXPECT_FALSE(judge_figures(report_of("c9", kCpu, {gemm("cpu", 0.0595)}), baseline).at(0).low);
  // A rule given by the caller is used as given.
  OutlierRule strict;
  strict.margin = 0.05;
  EXPECT_TRUE(judge_figures(report_of("c8", kCpu, {gemm("cpu", 0.0595)}), baseline, nullptr, strict).at(0).low);
}

TEST(HealthBaseline, AFigureOrModelTheBaselineLacksIsASkippedRowNamingIt) {
  const Baseline baseline = build_baseline(five_cpu_nodes());
  Metric other = gemm("cpu", 0.07);
  other.labels["dtype"] = "bf16";
  const auto rows = judge_against_baseline(report_of("node-z", kCpu, {gemm("cpu", 0.07), other}), baseline);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].state, State::Ok);
  EXPECT_TRUE(rows[1].skipped);
  EXPECT_EQ(rows[1].name, "ddx_health_gemm_tflops{device=\"cpu\",dtype=\"bf16\"}");
  EXPECT_EQ(rows[1].value, "not in the baseline: not judged");

  const auto other_model = judge_against_baseline(report_of("gpu-node", kGpu, {gemm("gpu0", 700)}), baseline);
  ASSERT_EQ(other_model.size(), 1u);
  EXPECT_TRUE(other_model[0].skipped);
  EXPECT_EQ(other_model[0].value, std::string("not in the baseline (it has no figures for '") + kGpu + "'): not judged");
}

// The message a bad file gets, or "" when it is read.
std::string error_of(const nlohmann::json& j) {
  try {
    baseline_from_json(j);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(HealthBaseline, ABadBaselineIsRefusedNamingTheKey) {
  nlohmann::json good = baseline_to_json(build_baseline(five_cpu_nodes()));
  ASSERT_EQ(error_of(good), "");

  nlohmann::json bad = good;
  bad["models"][kCpu][kCpuKey]["median"] = "fast";
  EXPECT_EQ(error_of(bad), "model '" + std::string(kCpu) + "' figure '" + kCpuKey + "': \"median\" is missing or not a number");
  bad = good;
  bad["models"][kCpu][kCpuKey].erase("mad");
  EXPECT_EQ(error_of(bad), "model '" + std::string(kCpu) + "' figure '" + kCpuKey + "': \"mad\" is missing or not a number");
  bad = good;
  bad["models"][kCpu][kCpuKey]["count"] = 0;
  EXPECT_EQ(error_of(bad), "model '" + std::string(kCpu) + "' figure '" + kCpuKey +
                               "': median and mad must be 0 or more and count 1 or more");
  bad = good;
  bad["models"][kCpu] = 3;
  EXPECT_EQ(error_of(bad), "model '" + std::string(kCpu) + "': not an object of figures");
  bad = good;
  bad["version"] = 2;
  EXPECT_EQ(error_of(bad), "baseline \"version\" 2: this ddx reads version 1");
  // A node's report given as a baseline.
  EXPECT_EQ(error_of({{"host", "node-a"}, {"checks", nlohmann::json::array()}}),
            "not a ddx health baseline (no \"format\": \"ddx-health-baseline\"; write one with ddx health fleet "
            "--save-baseline)");
}

// The file given with --baseline: one line naming the flag, the file and what is wrong.
TEST(HealthBaseline, ABaselineFileIsReadOrRefusedInOneLine) {
  const std::string dir = ::testing::TempDir() + "/health_baseline_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const nlohmann::json good = baseline_to_json(build_baseline(five_cpu_nodes()));
  std::ofstream(dir + "/good.json") << good.dump(2);
  EXPECT_EQ(read_baseline_file(dir + "/good.json").models.at(kCpu).at(kCpuKey).count, 5);
  auto error_reading = [](const std::string& path) -> std::string {
    try {
      read_baseline_file(path);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_reading(dir + "/missing.json"), "--baseline " + dir + "/missing.json: cannot read it: No such file or directory");
  std::ofstream(dir + "/truncated.json") << good.dump(2).substr(0, 40);
  EXPECT_EQ(error_reading(dir + "/truncated.json"),
            "--baseline " + dir + "/truncated.json: not JSON (write one with ddx health fleet --save-baseline)");
  nlohmann::json bad = good;
  bad["models"][kCpu][kCpuKey]["median"] = nullptr;
  std::ofstream(dir + "/bad.json") << bad.dump(2);
  EXPECT_EQ(error_reading(dir + "/bad.json"), "--baseline " + dir + "/bad.json: model '" + std::string(kCpu) + "' figure '" +
                                                  kCpuKey + "': \"median\" is missing or not a number");
  nlohmann::json empty = good;
  empty["models"] = nlohmann::json::object();
  std::ofstream(dir + "/empty.json") << empty.dump(2);
  EXPECT_EQ(error_reading(dir + "/empty.json"), "--baseline " + dir + "/empty.json: no figures in it: it judges nothing");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ddx::health
