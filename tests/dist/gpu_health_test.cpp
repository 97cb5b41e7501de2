// `ddx probe gpu-health` with the fake NVML (tests/fake_nvml) loaded through DDX_NVML_LIBRARY:
// planted faults (one GPU throttled, one link at x8, ECC errors on one device) are each a FAIL
// on their own GPU; a healthy box passes; no driver is SKIP with the reason; under ddx launch
// each rank reads its own GPU and rows name the rank.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "process_helpers.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::map<std::string, std::string> fake(const std::string& scenario) {
  return {{"DDX_NVML_LIBRARY", FAKE_NVML}, {"FAKE_NVML_SCENARIO", scenario}};
}

TEST(GpuHealth, PlantedFaultsFailOnTheirOwnGpus) {
  const std::string dir = scratch_dir("gpu-health", "faults");
  RunResult r = run_in(dir, {DDX_BIN, "probe", "gpu-health", "--json", dir + "/gpu.json"}, fake("faults"), 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "ddx probe gpu-health: 4 GPUs on 1 host (1 rank), NVML " + std::string(FAKE_NVML) +
                                ", driver 580.65.06-fake"))
      << r.output;
  EXPECT_TRUE(has(r.output, "clocks held down: hardware slowdown")) << r.output;
  EXPECT_TRUE(has(r.output, "gen 5 x8 (max gen 5 x16): the link trained narrower than the slot")) << r.output;
  EXPECT_TRUE(has(r.output, "2 uncorrected ECC errors since the driver loaded")) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir + "/gpu.json"));
  int fails = 0;
  for (const auto& c : j["checks"]) {
    if (c["status"] != "FAIL") continue;
    ++fails;
    const std::string name = c["check"];
    EXPECT_TRUE(name.find(" gpu1 clocks") != std::string::npos || name.find(" gpu2 pcie") != std::string::npos ||
                name.find(" gpu3 ecc") != std::string::npos)
        << name;
  }
  EXPECT_EQ(fails, 3) << j["checks"].dump(1);
  EXPECT_EQ(j["gpus"].size(), 4u);
}

TEST(GpuHealth, AHealthyMachinePasses) {
  const std::string dir = scratch_dir("gpu-health", "healthy");
  RunResult r = run_in(dir, {DDX_BIN, "probe", "gpu-health"}, fake("healthy"), 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, " 0 FAIL")) << r.output;
  EXPECT_FALSE(has(r.output, "FAIL  ")) << r.output;
}

TEST(GpuHealth, NoDriverIsSkipWithTheReasonAndExitZero) {
  const std::string dir = scratch_dir("gpu-health", "none");
  RunResult none = run_in(dir, {DDX_BIN, "probe", "gpu-health"}, {{"DDX_NVML_LIBRARY", dir + "/libnvidia-ml.so.1"}}, 60);
  EXPECT_EQ(none.exit_code, 0) << none.output;
  EXPECT_TRUE(has(none.output, "gpu-health: 1 checks: 0 PASS, 0 WARN, 0 FAIL, 1 SKIP (no NVIDIA driver ("))
      << none.output;
  RunResult init = run_in(dir, {DDX_BIN, "probe", "gpu-health"}, fake("init-fails"), 60);
  EXPECT_EQ(init.exit_code, 0) << init.output;
  EXPECT_TRUE(has(init.output, "nvmlInit failed: Driver Not Loaded (9)")) << init.output;
}

TEST(GpuHealth, UnderALauncherEachRankReadsItsOwnGpu) {
  const std::string dir = scratch_dir("gpu-health", "launch");
  RunResult r = run_in(dir, {DDX_BIN, "launch", "-np", "4", "--", DDX_BIN, "probe", "gpu-health", "--json", dir + "/gpu.json"},
                       fake("faults"), 120);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "4 GPUs on 1 host (4 ranks)")) << r.output;
  EXPECT_TRUE(has(r.output, "#2 (rank 2): gen 5 x8")) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir + "/gpu.json"));
  ASSERT_EQ(j["gpus"].size(), 4u);
  for (const auto& g : j["gpus"]) EXPECT_EQ(g["index"], g["rank"]) << g.dump();
}

}  // namespace
}  // namespace ddx::testing
