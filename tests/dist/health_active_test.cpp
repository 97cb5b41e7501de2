// `ddx health --level 2` and `--level 3` on this machine's CPU, as real processes (the kernels,
// the all-reduce of two Gloo ranks under ddx launch, the storage test, the burn-in): the
// known-answer GEMM exact under each of ATen's CPU kernel sets, a planted wrong element and a
// corrupted all-reduce each CRITICAL and named, level 3's burn-in. The LibTorch-free parts are
// unit-tested in tests/unit/health_active_parts_test.cpp. No timing is asserted (benchmarks/).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

using nlohmann::json;

struct HealthRun {
  int exit_code = -1;
  std::string output;
  json report;
};

// `ddx health ARGS --json` in a fresh folder, which is also its TMPDIR (the all-reduce's files),
// so a process left behind would carry the folder in its command line.
HealthRun run_health(const std::string& dir, std::vector<std::string> args, std::map<std::string, std::string> env = {},
                     std::vector<std::string> env_removals = {}, int timeout_s = 240) {
  std::vector<std::string> argv{DDX_BIN, "health"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--json", dir + "/report.json"});
  env["TMPDIR"] = dir;
  ChildProcess child(argv, env, dir + "/output.txt", env_removals);
  const RunResult r = result_of(child, timeout_s);
  HealthRun run{r.exit_code, r.output, json()};
  std::ifstream in(dir + "/report.json");
  if (in) run.report = json::parse(in, nullptr, false);
  EXPECT_TRUE(processes_left(dir).empty()) << "processes left behind by ddx health";
  return run;
}

const json& check_named(const HealthRun& run, const std::string& name) {
  static const json none;
  if (run.report.is_object()) {
    for (const json& c : run.report["checks"]) {
      if (c.value("name", "") == name) return c;
    }
  }
  ADD_FAILURE() << "no row '" << name << "' in the report; output:\n" << run.output;
  return none;
}

double metric_value(const json& check, const std::string& name) {
  for (const json& m : check.value("metrics", json::array())) {
    if (m.value("name", "") == name) return m.value("value", 0.0);
  }
  return -1;
}

std::vector<std::string> gemm_rows(const HealthRun& run) {
  std::vector<std::string> names;
  if (!run.report.is_object()) return names;
  for (const json& c : run.report["checks"]) {
    const std::string name = c.value("name", "");
    if (name.rfind("gemm ", 0) == 0) names.push_back(name);
  }
  return names;
}

// Every GEMM row of the run is exact with a rate, on the kernels named.
void expect_every_gemm_exact(const HealthRun& run, const std::string& kernels) {
  const std::vector<std::string> names = gemm_rows(run);
  for (const char* dtype : {"fp32", "fp64", "bf16"}) {  // fp16 too where torch's CPU matmul has it
    EXPECT_NE(std::find(names.begin(), names.end(), std::string("gemm cpu ") + dtype), names.end())
        << dtype << " missing; output:\n" << run.output;
  }
  for (const std::string& name : names) {
    const json& c = check_named(run, name);
    EXPECT_EQ(c.value("state", ""), "OK") << name << ": " << c.value("value", "");
    EXPECT_EQ(c.value("value", "").rfind("exact (262144 elements), ", 0), 0u) << name << ": " << c.value("value", "");
    EXPECT_NE(c.value("value", "").find("(512x1024x512, ATen " + kernels), std::string::npos) << name << ": " << c.value("value", "");
    EXPECT_GT(metric_value(c, "ddx_health_gemm_tflops"), 0) << name;
  }
}

// Each dtype goes through another library on a CPU: fp32 and fp64 through MKL, bf16 and fp16
// through oneDNN, else ATen's own kernels. Each switch moves its library to other kernels, and the
// answer must stay exact on every path: ATen's three capabilities, MKL on AVX2, oneDNN held to
// AVX2 (bf16 and fp16 fall back to ATen), and every switch at its lowest at once.
TEST(HealthActive, KnownAnswerGemmIsExactUnderEveryCpuKernelSet) {
  struct KernelSet {
    std::string name;
    std::map<std::string, std::string> env;
    std::string aten;  // the ATen capability the rows must name; "" = the machine's own
  };
  const std::vector<KernelSet> sets = {
      {"native", {}, ""},
      {"aten-default", {{"ATEN_CPU_CAPABILITY", "default"}}, "DEFAULT"},
      {"aten-avx2", {{"ATEN_CPU_CAPABILITY", "avx2"}}, "AVX2"},
      {"mkl-avx2", {{"MKL_ENABLE_INSTRUCTIONS", "AVX2"}}, ""},
      {"onednn-avx2", {{"ONEDNN_MAX_CPU_ISA", "AVX2"}}, ""},
      {"all-lowest",
       {{"ATEN_CPU_CAPABILITY", "default"}, {"MKL_ENABLE_INSTRUCTIONS", "SSE4_2"}, {"ONEDNN_MAX_CPU_ISA", "SSE41"}},
       "DEFAULT"},
  };
  const std::string dir = scratch_dir("health-active", "capability");
  for (const KernelSet& set : sets) {
    SCOPED_TRACE(set.name);
    const std::string run_dir = dir + "/" + set.name;
    std::system(("mkdir -p '" + run_dir + "'").c_str());
    // A switch this set does not name is removed, so the machine's environment cannot pick for it.
    std::vector<std::string> removals;
    for (const char* name : {"ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA"}) {
      if (set.env.count(name) == 0) removals.push_back(name);
    }
    const HealthRun run = run_health(run_dir, {"--level", "2", "--device", "cpu"}, set.env, removals);
    ASSERT_TRUE(run.report.is_object()) << run.output;
    expect_every_gemm_exact(run, set.aten);
  }
}

TEST(HealthActive, Level2OnACpuNodeGivesEveryRowAndItsFigures) {
  const std::string dir = scratch_dir("health-active", "level2");
  const std::string scratch = dir + "/scratch";
  std::system(("mkdir -p '" + scratch + "'").c_str());
  const HealthRun run = run_health(dir, {"--level", "2", "--path", scratch, "--storage-mib", "32"});
  ASSERT_TRUE(run.report.is_object()) << run.output;
  EXPECT_EQ(run.report.value("level", 0), 2);
  expect_every_gemm_exact(run, "");
  const json& compute = check_named(run, "compute cpu");
  EXPECT_EQ(compute.value("state", ""), "OK") << compute.dump();
  EXPECT_GT(metric_value(compute, "ddx_health_compute_tflops"), 0);
  EXPECT_EQ(compute["metrics"].size(), 3u) << "the kernels of ddx probe compute on CPU: n=256, 512, 1024";
  const json& memory = check_named(run, "memory cpu");
  EXPECT_EQ(memory.value("state", ""), "OK") << memory.dump();
  EXPECT_GT(metric_value(memory, "ddx_health_memory_gbps"), 0);
  EXPECT_TRUE(check_named(run, "host-device").value("skipped", false));
  const json& all_reduce = check_named(run, "all-reduce");
  EXPECT_EQ(all_reduce.value("state", ""), "OK") << all_reduce.dump();
  EXPECT_NE(all_reduce.value("value", "").find("across 2 CPU ranks (Gloo), every result checked"), std::string::npos);
  EXPECT_GT(metric_value(all_reduce, "ddx_health_allreduce_busbw_gbps"), 0);
  const json& storage = check_named(run, "storage " + scratch);
  EXPECT_EQ(storage.value("state", ""), "OK") << storage.dump();
  EXPECT_NE(storage.value("value", "").find("32 MiB verified"), std::string::npos) << storage.dump();
  EXPECT_GT(metric_value(storage, "ddx_health_storage_write_mbps"), 0);
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + scratch + "')\"").c_str()), 0) << "the storage test leaves nothing";
  for (const json& c : run.report["checks"]) {  // level 1 may WARN about this machine; level 2 finds nothing wrong
    EXPECT_NE(c.value("state", ""), "CRITICAL") << c.dump();
  }
}

TEST(HealthActive, APlantedWrongGemmElementIsCriticalNamingDeviceDtypeAndElement) {
  const std::string dir = scratch_dir("health-active", "gemm-wrong");
  const HealthRun run = run_health(dir, {"--level", "2"}, {{"DDX_FAULT", "gemm-wrong@device=cpu,dtype=fp32,row=300,col=17"}});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  const json& c = check_named(run, "gemm cpu fp32");
  EXPECT_EQ(c.value("state", ""), "CRITICAL") << c.dump();
  const std::string value = c.value("value", "");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(value, m, std::regex(R"(^wrong at \(300,17\): (-?\d+) not (-?\d+) \(1 of 262144 elements\))")))
      << value;
  EXPECT_EQ(std::stoll(m[1]), std::stoll(m[2]) + 1) << "the planted element is the exact answer plus one";
  EXPECT_EQ(c.value("reason", ""), "gemm cpu fp32 wrong element");
  EXPECT_FALSE(c.value("remediation", "").empty());
  EXPECT_NE(run.report.value("drain_reason", "").find("gemm cpu fp32 wrong element"), std::string::npos)
      << run.report.value("drain_reason", "");
  EXPECT_NE(run.report.value("verdict", "").find("gemm cpu fp32 wrong at (300,17)"), std::string::npos)
      << run.report.value("verdict", "");
  for (const std::string& name : gemm_rows(run)) {  // the fault targets fp32 alone
    if (name != "gemm cpu fp32") EXPECT_EQ(check_named(run, name).value("state", ""), "OK") << name;
  }
}

TEST(HealthActive, AGemmFaultOutsideTheProductIsRefusedBeforeAnyCheck) {
  const std::string dir = scratch_dir("health-active", "gemm-outside");
  const HealthRun run = run_health(dir, {"--level", "2"}, {{"DDX_FAULT", "gemm-wrong@row=512"}});
  EXPECT_NE(run.output.find("row=512,col=0 is outside the 512 x 512 known-answer product on cpu"), std::string::npos)
      << run.output;
  EXPECT_TRUE(gemm_rows(run).empty()) << run.output;
  // Bad input, not a finding about the node: one line, UNKNOWN, no table and no report.
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_FALSE(run.report.is_object()) << run.output;
  EXPECT_EQ(run.output.find("check "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("ddx: error: DDX_FAULT 'gemm-wrong@row=512': row=512,col=0 is outside the 512 x 512 "
                            "known-answer product on cpu\n"),
            std::string::npos)
      << run.output;
}

TEST(HealthActive, ACorruptedAllReduceIsCritical) {
  const std::string dir = scratch_dir("health-active", "corrupt");
  const HealthRun run = run_health(dir, {"--level", "2"}, {{"DDX_FAULT", "corrupt-collective@rank=1"}});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  const json& c = check_named(run, "all-reduce");
  EXPECT_EQ(c.value("state", ""), "CRITICAL") << c.dump();
  EXPECT_NE(c.value("value", "").find("wrong data across 2 CPU ranks (Gloo)"), std::string::npos) << c.dump();
  EXPECT_NE(c.value("value", "").find("first on rank 1, element 0"), std::string::npos) << c.dump();
  EXPECT_EQ(c.value("reason", ""), "all-reduce wrong data");
}

TEST(HealthActive, Level3BurnsInCheckingEveryProductAndCatchesAWrongOne) {
  const std::string dir = scratch_dir("health-active", "level3");
  const HealthRun clean = run_health(dir, {"--level", "3", "--burn-in", "3"});
  ASSERT_TRUE(clean.report.is_object()) << clean.output;
  EXPECT_EQ(clean.report.value("level", 0), 3);
  EXPECT_TRUE(check_named(clean, "links").value("skipped", false)) << "one device: no links";
  const json& burn = check_named(clean, "burn-in cpu");
  EXPECT_EQ(burn.value("state", ""), "OK") << burn.dump();
  EXPECT_NE(burn.value("value", "").find("every element exact"), std::string::npos) << burn.dump();
  EXPECT_GT(metric_value(burn, "ddx_health_burnin_products"), 0);
  EXPECT_GT(metric_value(burn, "ddx_health_burnin_tflops"), 0);
  EXPECT_FALSE(check_named(clean, "burn-in cpu throttle").is_null());
  EXPECT_NE(clean.output.find("ddx health: burn-in 3 of 3 s: cpu "), std::string::npos) << clean.output;

  const std::string faulted_dir = dir + "/faulted";
  std::system(("mkdir -p '" + faulted_dir + "'").c_str());
  const HealthRun faulted =
      run_health(faulted_dir, {"--level", "3", "--burn-in", "3"}, {{"DDX_FAULT", "gemm-wrong@dtype=fp64,row=511,col=511"}});
  EXPECT_EQ(faulted.exit_code, 2) << faulted.output;
  const json& caught = check_named(faulted, "burn-in cpu");
  EXPECT_EQ(caught.value("state", ""), "CRITICAL") << caught.dump();
  EXPECT_NE(caught.value("value", "").find("fp64 "), std::string::npos) << caught.dump();
  EXPECT_NE(caught.value("value", "").find("wrong at (511,511)"), std::string::npos) << caught.dump();
  EXPECT_EQ(caught.value("reason", ""), "burn-in cpu fp64 wrong element");
}

}  // namespace
}  // namespace ddx::testing
