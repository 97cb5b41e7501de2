// `ddx probe gpu-health` with the fake NVML (tests/fake_nvml) loaded through DDX_NVML_LIBRARY,
// which answers each argument (ECC error type x counter, threshold type, link) with its own
// value: planted faults (old lifetime ECC errors, new ones, a pending remap, a link down, one
// GPU throttled, one at x8, one near its slowdown temperature) give each row of gpu.json its own
// status; a healthy box reads 4 GPUs, every row PASS; no driver is SKIP with the reason; under
// ddx launch each rank reads its own GPU by its local rank, on one node and on two.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>

#include "launch_verdict.h"
#include "process_helpers.h"

namespace ddx::testing {
namespace {

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::map<std::string, std::string> fake(const std::string& scenario) {
  return {{"DDX_NVML_LIBRARY", FAKE_NVML}, {"FAKE_NVML_SCENARIO", scenario}};
}

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// Whether this process may read the kernel log as the probe does (root, or dmesg_restrict=0):
// the xid rows are PASS then, and SKIP only when it is refused.
bool kernel_log_readable() {
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

const char* const kChecks[] = {"ecc", "row remapping", "clocks", "pcie", "nvlink", "temperature", "power", "xid"};

// Every row of a healthy GPU on this host: PASS, the xid row SKIP where the kernel log is refused.
std::map<std::string, std::string> healthy_rows(int gpus) {
  std::map<std::string, std::string> rows;
  for (int g = 0; g < gpus; ++g) {
    for (const char* check : kChecks) {
      rows[this_host() + " gpu" + std::to_string(g) + " " + check] =
          std::string(check) == "xid" && !kernel_log_readable() ? "SKIP" : "PASS";
    }
  }
  return rows;
}

// gpu.json's rows: check name -> status, and check name -> value.
std::map<std::string, std::string> rows_of(const nlohmann::json& j, const char* field = "status") {
  std::map<std::string, std::string> rows;
  for (const auto& c : j["checks"]) rows[c["check"].get<std::string>()] = c[field].get<std::string>();
  return rows;
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
                name.find(" gpu2 nvlink") != std::string::npos || name.find(" gpu3 ecc") != std::string::npos)
        << name;
  }
  EXPECT_EQ(fails, 4) << j["checks"].dump(1);
  EXPECT_EQ(j["gpus"].size(), 4u);
  // Each row's status by name: every planted case on its own GPU, every other row PASS. A reader
  // that swapped NVML's volatile and aggregate counters would FAIL gpu0's old lifetime errors; one
  // that read the shutdown threshold (92 C) would PASS gpu0's 84 C, the GPU's max operating
  // temperature (83 C) FAIL it; swapped remap outputs would FAIL gpu1's pending remap.
  const std::string host = this_host();
  std::map<std::string, std::string> expected = healthy_rows(4);
  expected[host + " gpu0 ecc"] = "WARN";
  expected[host + " gpu0 temperature"] = "WARN";
  expected[host + " gpu1 clocks"] = "FAIL";
  expected[host + " gpu1 row remapping"] = "WARN";
  expected[host + " gpu2 pcie"] = "FAIL";
  expected[host + " gpu2 nvlink"] = "FAIL";
  expected[host + " gpu3 ecc"] = "FAIL";
  EXPECT_EQ(rows_of(j), expected) << j["checks"].dump(1);
  auto values = rows_of(j, "value");
  const std::string gpu = "NVIDIA H100 80GB HBM3 (fake) #";
  EXPECT_EQ(values[host + " gpu0 ecc"], gpu + "0: 4 uncorrected ECC errors over its lifetime, none since the driver loaded");
  EXPECT_EQ(values[host + " gpu0 temperature"], gpu + "0: 84 C (slows down at 87 C)");
  EXPECT_EQ(values[host + " gpu1 row remapping"], gpu + "1: a remapping is pending");
  EXPECT_EQ(values[host + " gpu2 nvlink"], gpu + "2: 17 of 18 links up");
  EXPECT_EQ(values[host + " gpu3 ecc"], gpu + "3: 2 uncorrected ECC errors since the driver loaded");
  EXPECT_TRUE(has(r.output, "gpu-health: 32 checks: ")) << r.output;
  EXPECT_TRUE(has(r.output, ", 3 WARN, 4 FAIL, ")) << r.output;
  // The facts behind the rows, each counter as planted.
  const auto& g0 = j["gpus"][0];
  EXPECT_EQ(g0["ecc_uncorrected_volatile"], 0) << g0.dump();
  EXPECT_EQ(g0["ecc_uncorrected_aggregate"], 4) << g0.dump();
  EXPECT_EQ(g0["ecc_corrected_volatile"], 3) << g0.dump();
  EXPECT_EQ(g0["slowdown_temperature_c"], 87) << g0.dump();
  EXPECT_EQ(j["gpus"][1]["remap_pending"], true) << j["gpus"][1].dump();
  EXPECT_EQ(j["gpus"][1]["remap_failure"], false) << j["gpus"][1].dump();
  EXPECT_EQ(j["gpus"][2]["nvlinks_active"], 17) << j["gpus"][2].dump();
  EXPECT_EQ(j["gpus"][2]["nvlinks_total"], 18) << j["gpus"][2].dump();
  EXPECT_EQ(j["gpus"][3]["ecc_uncorrected_volatile"], 2) << j["gpus"][3].dump();
  EXPECT_EQ(j["gpus"][3]["ecc_uncorrected_aggregate"], 6) << j["gpus"][3].dump();
}

// Healthy means every GPU read and every row PASS: the no-driver path (0 GPUs, one SKIP row,
// exit 0) must not pass for it.
TEST(GpuHealth, AHealthyMachinePasses) {
  const std::string dir = scratch_dir("gpu-health", "healthy");
  RunResult r = run_in(dir, {DDX_BIN, "probe", "gpu-health", "--json", dir + "/gpu.json"}, fake("healthy"), 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, " 0 FAIL")) << r.output;
  EXPECT_FALSE(has(r.output, "FAIL  ")) << r.output;
  EXPECT_TRUE(has(r.output, "ddx probe gpu-health: 4 GPUs on 1 host (1 rank), NVML ")) << r.output;
  const int skips = kernel_log_readable() ? 0 : 4;  // the xid rows, only where the kernel log is refused
  EXPECT_TRUE(has(r.output, "gpu-health: 32 checks: " + std::to_string(32 - skips) + " PASS, 0 WARN, 0 FAIL, " +
                                std::to_string(skips) + " SKIP\n"))
      << r.output;
  const auto j = nlohmann::json::parse(read_file(dir + "/gpu.json"));
  ASSERT_EQ(j["gpus"].size(), 4u) << j.dump(1);
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(rows_of(j), healthy_rows(4)) << j["checks"].dump(1);
  for (const auto& g : j["gpus"]) EXPECT_EQ(g["xids_readable"].get<bool>(), kernel_log_readable()) << g.dump();
  // The counters as planted (corrected: 3 since the driver loaded, 12 lifetime; 1 row remapped
  // after a corrected error): a reader of the wrong type or counter shows another number.
  const auto values = rows_of(j, "value");
  EXPECT_EQ(values.at(this_host() + " gpu0 ecc"),
            "NVIDIA H100 80GB HBM3 (fake) #0: no uncorrected errors (3 corrected since the driver loaded)");
  EXPECT_EQ(values.at(this_host() + " gpu3 row remapping"),
            "NVIDIA H100 80GB HBM3 (fake) #3: 1 rows remapped after corrected, 0 after uncorrected errors");
  EXPECT_EQ(values.at(this_host() + " gpu2 nvlink"), "NVIDIA H100 80GB HBM3 (fake) #2: 18 of 18 links up");
  EXPECT_EQ(values.at(this_host() + " gpu1 temperature"), "NVIDIA H100 80GB HBM3 (fake) #1: 40 C (slows down at 87 C)");
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

// Local rank, not global rank, picks the GPU: two nodes of 2 ranks each (two `ddx launch
// --nnodes 2` on loopback, as on two machines), where ranks 2 and 3 are local ranks 0 and 1 of
// node 1 and must read GPUs 0 and 1; by global rank they would read GPUs 2 and 3.
TEST(GpuHealth, OnTwoNodesRanksTwoAndThreeReadTheirNodesGpusZeroAndOne) {
  const std::string dir = scratch_dir("gpu-health", "two-nodes");
  const std::string port = std::to_string(free_ports_in_a_row(1));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{DDX_BIN, "launch", "--nnodes", "2", "--node-rank", std::to_string(node), "--master-addr",
                                 "127.0.0.1", "--master-port", port, "-np", "2", "--", DDX_BIN, "probe", "gpu-health",
                                 "--json", dir + "/gpu.json"},
        fake("healthy"), dir + "/node" + std::to_string(node) + ".txt"));
  }
  RunResult r[2];
  for (int node = 0; node < 2; ++node) r[node] = result_of(*nodes[node], 90);
  nodes.clear();  // kills whatever timed out, with its process group
  const std::string both = "--- node 0 ---\n" + r[0].output + "\n--- node 1 ---\n" + r[1].output;
  EXPECT_EQ(r[0].exit_code, 0) << both;
  EXPECT_EQ(r[1].exit_code, 0) << both;
  EXPECT_TRUE(processes_left(dir).empty()) << "processes left behind";
  EXPECT_TRUE(has(r[0].output, "ddx probe gpu-health: 4 GPUs on 1 host (4 ranks)")) << both;
  EXPECT_TRUE(has(r[0].output, "NVIDIA H100 80GB HBM3 (fake) #0 (rank 2): ")) << both;
  EXPECT_TRUE(has(r[0].output, "NVIDIA H100 80GB HBM3 (fake) #1 (rank 3): ")) << both;
  const auto j = nlohmann::json::parse(read_file(dir + "/gpu.json"));
  ASSERT_EQ(j["gpus"].size(), 4u) << j.dump(1);
  std::map<int, int> gpu_of_rank;
  std::map<int, std::string> uuid_of_rank;
  for (const auto& g : j["gpus"]) {
    gpu_of_rank[g["rank"].get<int>()] = g["index"].get<int>();
    uuid_of_rank[g["rank"].get<int>()] = g["uuid"].get<std::string>();
  }
  EXPECT_EQ(gpu_of_rank, (std::map<int, int>{{0, 0}, {1, 1}, {2, 0}, {3, 1}})) << j["gpus"].dump(1);
  EXPECT_EQ(uuid_of_rank[2], "GPU-fake-0") << j["gpus"].dump(1);
  EXPECT_EQ(uuid_of_rank[3], "GPU-fake-1") << j["gpus"].dump(1);
}

// Planted faults under ddx launch are the probe's verdict, not a crash: every rank ends with it
// (exit 1), and the launcher shows it, naming the failed checks, with no root cause.
TEST(GpuHealth, AFailUnderALauncherIsTheJobsVerdict) {
  const std::string dir = scratch_dir("gpu-health", "verdict");
  RunResult r = run_in(dir, {DDX_BIN, "launch", "-np", "4", "--", DDX_BIN, "probe", "gpu-health"}, fake("faults"), 120);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  expect_launch_reported_verdict(r.output, 4, 1, "gpu-health: 32 checks: ");
  for (const std::string check : {" gpu1 clocks (", " gpu2 pcie (", " gpu2 nvlink (", " gpu3 ecc ("}) {
    const size_t verdict = r.output.find("the job reported a verdict");
    EXPECT_NE(r.output.find(check, verdict), std::string::npos) << check << " is not in the verdict:\n" << r.output;
  }
}

}  // namespace
}  // namespace ddx::testing
