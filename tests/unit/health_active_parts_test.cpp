// The LibTorch-free parts of `ddx health` levels 2 and 3: the storage test on a real folder (a
// figure, a corrupted read-back, a folder that is not there, one too full to test), the
// judgement of the node's all-reduce and pairwise runs on planted results of
// `ddx probe bandwidth`, and what the burn-in watches (CPU thermal throttle counters in a planted
// sysfs tree, NVML facts of a GPU before and after). The kernels' side runs in
// tests/dist/health_active_test.cpp.
#include <gtest/gtest.h>
#include <filesystem>
#include <unistd.h>
#include <sys/wait.h>
#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gpu/gpu_facts.h"
#include "health/local_collectives.h"
#include "health/storage_check.h"
#include "health/throttle_watch.h"

namespace ddx::health {
namespace {

using nlohmann::json;

std::string fresh_folder(const std::string& tag) {
  const std::string dir = std::string(DDX_BINARY_DIR) + "/test-scratch/health-active-" + tag + "-" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  return dir;
}

int entries_in(const std::string& dir) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  while (const dirent* e = d ? ::readdir(d) : nullptr) n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
  if (d) ::closedir(d);
  return n;
}

const Metric* metric_named(const Check& c, const std::string& name) {
  for (const Metric& m : c.metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

// --- storage ---

// A run killed mid-test (the example scripts' timeout) leaves its file behind; the next run
// removes the files of this host's runs whose process is gone, and nothing else.
TEST(HealthStorage, FilesOfKilledRunsAreRemovedAndOthersKept) {
  const std::string dir = fresh_folder("killed");
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);  // a pid whose process is gone
  const std::string killed = dir + "/.ddx-health-" + host + "-" + std::to_string(dead) + ".tmp";
  const std::string alive = dir + "/.ddx-health-" + host + "-1.tmp";                 // pid 1 runs
  const std::string other_host = dir + "/.ddx-health-another-host-" + std::to_string(dead) + ".tmp";
  const std::string not_ours = dir + "/.ddx-health-" + host + "-notapid.tmp";
  for (const std::string& f : {killed, alive, other_host, not_ours}) std::ofstream(f) << std::string(4096, 'x');
  const Check c = storage_check(dir, 1);
  EXPECT_EQ(c.state, State::Ok) << c.value;
  EXPECT_FALSE(std::filesystem::exists(killed));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(other_host));  // shared scratch: another host's run may be going
  EXPECT_TRUE(std::filesystem::exists(not_ours));
}

TEST(HealthStorage, WritesSyncsVerifiesAndGivesAFigure) {
  const std::string dir = fresh_folder("ok");
  const Check c = storage_check(dir, 8);
  EXPECT_EQ(c.name, "storage " + dir);
  EXPECT_EQ(c.state, State::Ok) << c.value;
  EXPECT_FALSE(c.skipped);
  EXPECT_NE(c.value.find("MB/s write with fsync"), std::string::npos) << c.value;
  EXPECT_NE(c.value.find("8 MiB verified"), std::string::npos) << c.value;
  const Metric* write = metric_named(c, "ddx_health_storage_write_mbps");
  ASSERT_NE(write, nullptr);
  EXPECT_GT(write->value, 0);
  EXPECT_TRUE(write->judged);
  EXPECT_EQ(write->labels.at("path"), dir);
  EXPECT_EQ(entries_in(dir), 0) << "the test file is removed";
}

TEST(HealthStorage, ADifferentReadBackIsCriticalNamingThePath) {
  const std::string dir = fresh_folder("corrupt");
  std::string seen;
  // One byte changed on disk between the fsync and the read-back, as a device returning wrong data would.
  const Check c = storage_check(dir, 8, [&](const std::string& file) {
    seen = file;
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5 << 20);
    const char byte = static_cast<char>(f.get());
    f.seekp(5 << 20);
    f.put(static_cast<char>(~byte));
  });
  EXPECT_EQ(seen.rfind(dir + "/.ddx-health-", 0), 0u) << seen;
  EXPECT_EQ(c.state, State::Critical) << c.value;
  EXPECT_NE(c.value.find("checksum"), std::string::npos) << c.value;
  EXPECT_EQ(c.reason, "storage " + dir + " read back differs");
  EXPECT_NE(c.remediation.find(dir), std::string::npos) << c.remediation;
  EXPECT_TRUE(c.metrics.empty());
  EXPECT_EQ(entries_in(dir), 0) << "the test file is removed after a failure too";
}

TEST(HealthStorage, AShortReadBackIsCritical) {
  const std::string dir = fresh_folder("short");
  const Check c = storage_check(dir, 8, [](const std::string& file) { ::truncate(file.c_str(), 3 << 20); });
  EXPECT_EQ(c.state, State::Critical) << c.value;
  EXPECT_NE(c.value.find("read back 3145728 of 8388608 bytes"), std::string::npos) << c.value;
}

TEST(HealthStorage, AFolderThatIsNotThereIsCritical) {
  const std::string dir = fresh_folder("gone") + "/not-here";
  const Check c = storage_check(dir, 8);
  EXPECT_EQ(c.state, State::Critical);
  EXPECT_NE(c.value.find(dir), std::string::npos) << c.value;
  EXPECT_NE(c.value.find("No such file or directory"), std::string::npos) << c.value;
  EXPECT_EQ(c.reason.rfind("storage " + dir, 0), 0u) << c.reason;
}

TEST(HealthStorage, AFolderTooFullToTestIsAWarningAndWritesNothing) {
  const std::string dir = fresh_folder("full");
  const Check c = storage_check(dir, 1e12);  // an exbibyte: more than any test machine has free
  EXPECT_EQ(c.state, State::Warn) << c.value;
  EXPECT_NE(c.value.find("was not run"), std::string::npos) << c.value;
  EXPECT_EQ(entries_in(dir), 0);
}

// --- the node's all-reduce and links, judged from ddx probe bandwidth's JSON ---

LocalRun gloo_run() { return {"ddx", 2, "gloo", 45}; }
LocalRun nccl_run() { return {"ddx", 4, "nccl", 45}; }

json sweep_json(int wrong, double busbw) {
  json first_wrong = {{"rank", 1}, {"element", 7}, {"got", 4.0}, {"expected", 3.0}};
  json placement = wrong > 0 ? json{{"first_wrong", first_wrong}} : json::object();
  return {{"out_of_bounds", {{"count", wrong > 0 ? 1 : 0}, {"okay", wrong == 0}}},
          {"average_bus_bandwidth", {{"bandwidth", busbw}, {"okay", true}}},
          {"results", json::array({{{"ddx", {{"out_of_place", placement}, {"in_place", nullptr}}}}})},
          {"ddx", {{"collectives", json::array({{{"collective", "all_reduce"}, {"wrong_elements", wrong}}})}}}};
}

LocalRunResult finished(int exit_code, std::optional<json> doc, const std::string& line = "") {
  LocalRunResult r;
  r.outcome.exit_code = exit_code;
  r.json = std::move(doc);
  r.log_line = line;
  return r;
}

TEST(HealthAllReduce, CheckedDataGivesTheBusBandwidthAsAJudgedFigure) {
  const Check c = judge_all_reduce(gloo_run(), finished(0, sweep_json(0, 0.75)));
  EXPECT_EQ(c.name, "all-reduce");
  EXPECT_EQ(c.state, State::Ok) << c.value;
  EXPECT_NE(c.value.find("0.75 GB/s bus bandwidth across 2 CPU ranks (Gloo)"), std::string::npos) << c.value;
  const Metric* m = metric_named(c, "ddx_health_allreduce_busbw_gbps");
  ASSERT_NE(m, nullptr);
  EXPECT_DOUBLE_EQ(m->value, 0.75);
  EXPECT_TRUE(m->judged);
  EXPECT_EQ(m->labels.at("engine"), "gloo");
}

TEST(HealthAllReduce, WrongDataIsCriticalNamingTheFirstElement) {
  for (const LocalRun& run : {gloo_run(), nccl_run()}) {
    const Check c = judge_all_reduce(run, finished(1, sweep_json(3, 0.7)));
    EXPECT_EQ(c.state, State::Critical) << c.value;
    EXPECT_NE(c.value.find("3 wrong elements"), std::string::npos) << c.value;
    EXPECT_NE(c.value.find("rank 1, element 7: got 4, want 3"), std::string::npos) << c.value;
    EXPECT_EQ(c.reason, "all-reduce wrong data");
    EXPECT_TRUE(c.metrics.empty());
  }
}

TEST(HealthAllReduce, NoResultIsUnknownOnCpuAndCriticalOnGpus) {
  const Check cpu = judge_all_reduce(gloo_run(), finished(3, std::nullopt, "ddx: error: rank 1 failed"));
  EXPECT_EQ(cpu.state, State::Unknown) << cpu.value;
  EXPECT_NE(cpu.value.find("ddx: error: rank 1 failed"), std::string::npos) << cpu.value;
  LocalRunResult hung = finished(-1, std::nullopt);
  hung.outcome.timed_out = true;
  const Check gpus = judge_all_reduce(nccl_run(), hung);
  EXPECT_EQ(gpus.state, State::Critical) << gpus.value;
  EXPECT_NE(gpus.value.find("4 GPUs (NCCL) gave no result within 45 s"), std::string::npos) << gpus.value;
  EXPECT_EQ(gpus.reason, "all-reduce hung");
  // A run that ended badly with a JSON saying nothing was wrong is still no pass.
  EXPECT_EQ(judge_all_reduce(gloo_run(), finished(3, sweep_json(0, 0.7))).state, State::Unknown);
}

json pairs_json(int wrong, bool slow) {
  json pairs = json::array();
  for (auto [a, b] : {std::pair{0, 1}, {2, 3}, {0, 2}, {1, 3}, {0, 3}, {1, 2}}) {
    pairs.push_back({{"a", a}, {"b", b}, {"bw", slow && a == 1 && b == 3 ? 20.0 : 140.0}, {"nwrong", wrong > 0 && a == 2 ? wrong : 0}});
  }
  json slow_links = slow ? json::array({{{"a", 1}, {"b", 3}, {"bw", 20.0}}}) : json::array();
  return {{"ddx", {{"pairs", pairs}, {"median_bw", 140.0}, {"slow_links", slow_links}, {"nwrong", wrong}}}};
}

TEST(HealthLinks, EveryLinkIsAJudgedFigureAndSlowOrWrongOnesAreNamed) {
  const Check ok = judge_pairwise(nccl_run(), finished(0, pairs_json(0, false)));
  EXPECT_EQ(ok.name, "links");
  EXPECT_EQ(ok.state, State::Ok) << ok.value;
  ASSERT_EQ(ok.metrics.size(), 6u);
  EXPECT_EQ(ok.metrics[0].labels.at("a"), "gpu0");
  EXPECT_EQ(ok.metrics[0].labels.at("b"), "gpu1");
  EXPECT_TRUE(ok.metrics[0].judged);

  const Check slow = judge_pairwise(nccl_run(), finished(1, pairs_json(0, true)));
  EXPECT_EQ(slow.state, State::Warn) << slow.value;
  EXPECT_NE(slow.value.find("gpu1-gpu3 20.0 GB/s"), std::string::npos) << slow.value;

  const Check wrong = judge_pairwise(nccl_run(), finished(1, pairs_json(5, false)));
  EXPECT_EQ(wrong.state, State::Critical) << wrong.value;
  EXPECT_EQ(wrong.reason, "link gpu2-gpu3 wrong data");
}

// --- what the burn-in watches ---

void plant_counter(const std::string& root, int cpu, const char* counter, uint64_t events) {
  const std::string dir = root + "/devices/system/cpu/cpu" + std::to_string(cpu) + "/thermal_throttle";
  std::system(("mkdir -p '" + dir + "'").c_str());
  std::ofstream(dir + "/" + counter) << events << "\n";
}

TEST(HealthBurnInWatch, CpuThrottleCountersThatRoseAreAWarningNamingTheCpus) {
  const std::string root = fresh_folder("sysfs");
  EXPECT_TRUE(judge_cpu_throttle(read_cpu_throttle_counts(root), read_cpu_throttle_counts(root)).skipped);
  for (int cpu = 0; cpu < 4; ++cpu) {
    plant_counter(root, cpu, "core_throttle_count", 10);
    plant_counter(root, cpu, "package_throttle_count", 2);
  }
  std::system(("mkdir -p '" + root + "/devices/system/cpu/cpufreq'").c_str());  // not a CPU
  const CpuThrottleCounts before = read_cpu_throttle_counts(root);
  EXPECT_EQ(before.size(), 8u);
  const Check calm = judge_cpu_throttle(before, read_cpu_throttle_counts(root));
  EXPECT_EQ(calm.state, State::Ok) << calm.value;
  EXPECT_FALSE(calm.skipped);

  plant_counter(root, 2, "core_throttle_count", 15);
  plant_counter(root, 3, "core_throttle_count", 11);
  plant_counter(root, 0, "package_throttle_count", 3);
  const Check hot = judge_cpu_throttle(before, read_cpu_throttle_counts(root));
  EXPECT_EQ(hot.state, State::Warn) << hot.value;
  EXPECT_NE(hot.value.find("6 core events on cpu 2,3, 1 package events"), std::string::npos) << hot.value;
  EXPECT_EQ(hot.reason, "cpu thermal throttling");
}

gpu::GpuFacts gpu_facts(unsigned long long corrected, unsigned long long uncorrected) {
  gpu::GpuFacts f;
  f.index = 0;
  f.name = "NVIDIA H100 80GB HBM3";
  f.ecc_corrected_volatile = corrected;
  f.ecc_uncorrected_volatile = uncorrected;
  f.ecc_uncorrected_aggregate = uncorrected;
  f.clock_event_reasons = 0;
  return f;
}

TEST(HealthBurnInWatch, GpuThrottlingAndNewEccErrorsUnderLoadAreNamed) {
  const auto calm = judge_gpu_under_load("gpu0", gpu_facts(5, 0), gpu_facts(5, 0), 0x4 /* power cap */);
  ASSERT_EQ(calm.size(), 2u);
  EXPECT_EQ(calm[0].name, "burn-in gpu0 clocks");
  EXPECT_EQ(calm[0].state, State::Ok) << calm[0].value;
  EXPECT_EQ(calm[1].name, "burn-in gpu0 ecc");
  EXPECT_EQ(calm[1].state, State::Ok) << calm[1].value;

  const auto hot = judge_gpu_under_load("gpu0", gpu_facts(5, 0), gpu_facts(9, 0), 0x4 | 0x40 /* hw thermal */);
  EXPECT_EQ(hot[0].state, State::Critical) << hot[0].value;
  EXPECT_NE(hot[0].value.find("hardware thermal slowdown"), std::string::npos) << hot[0].value;
  EXPECT_EQ(hot[0].reason, "gpu0 throttled under load");
  EXPECT_EQ(hot[1].state, State::Warn) << hot[1].value;
  EXPECT_NE(hot[1].value.find("4 corrected ECC errors during the burn-in"), std::string::npos) << hot[1].value;

  const auto broken = judge_gpu_under_load("gpu0", gpu_facts(5, 1), gpu_facts(5, 3), 0);
  EXPECT_EQ(broken[1].state, State::Critical) << broken[1].value;
  EXPECT_NE(broken[1].value.find("2 uncorrected ECC errors during the burn-in"), std::string::npos) << broken[1].value;
  EXPECT_EQ(broken[1].reason, "gpu0 uncorrectable ECC under load");
}

}  // namespace
}  // namespace ddx::health
