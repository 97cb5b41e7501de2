// Level 1 of `ddx health` (probes/health/level1*.h): planted kernel-log lines (a whitelisted XID,
// XID 79 naming its GPU's bus id, corrected and uncorrected machine checks, an unreadable log),
// --path folders (thresholds on statvfs figures, a missing folder, a file, a real folder, and in
// a forked child a read-only mount and a folder another user cannot write), the doctor's node
// rows (kept and left out by name, a small /dev/shm: by many local ranks, and for real in a
// private mount namespace), memory and clock judgements, and the fake NVML loaded through
// DDX_NVML_LIBRARY (healthy: nothing CRITICAL; faults: each GPU's planted case, with the retired
// pages and PCIe replays gpu-health does not read; no driver: one skipped row).
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ddx/processes/shm_namespace.h"
#include "dist/process_helpers.h"
#include "doctor/doctor_checks.h"
#include "doctor/doctor_facts.h"
#include "health/level1.h"
#include "health/level1_gpus.h"
#include "health/level1_kernel_log.h"
#include "health/level1_node.h"
#include "health/level1_paths.h"

namespace ddx::health {
namespace {

namespace fs = std::filesystem;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const Check& row(const std::vector<Check>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.name == name) return r;
  }
  throw std::runtime_error("no row " + name);
}

bool has_row(const std::vector<Check>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.name == name) return true;
  }
  return false;
}

std::string dump(const std::vector<Check>& rows) {
  std::string out;
  for (const auto& r : rows) {
    out += r.name + " | " + (r.skipped ? "skipped" : to_string(r.state)) + " | " + r.value + " | " + r.remediation +
           " | " + r.reason + "\n";
  }
  return out;
}

// A fresh folder under the build tree's scratch space, removed by the test's end.
class Scratch {
 public:
  explicit Scratch(const std::string& name) {
    path_ = fs::temp_directory_path() / ("ddx-health-level1-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string path() const { return path_.string(); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  fs::path path_;
};

// Runs `body` in a forked child (for what changes the process: a mount namespace, the user) and
// returns what it printed; nullopt with `skip` set when the child says "SKIP: why". The child is
// killed after 30 s.
std::optional<std::string> in_child(const std::function<std::string()>& body, std::string& skip) {
  int out[2];
  if (::pipe(out) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    std::string text;
    try {
      text = body();
    } catch (const std::exception& e) {
      text = std::string("EXCEPTION: ") + e.what();
    }
    (void)!::write(out[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buffer[4096];
  pollfd p{out[0], POLLIN, 0};
  while (::poll(&p, 1, 30000) == 1) {
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  ::kill(pid, SIGKILL);  // no-op when it already exited
  ::waitpid(pid, nullptr, 0);
  if (text.rfind("SKIP: ", 0) == 0) {
    skip = text.substr(6);
    return std::nullopt;
  }
  return text;
}

// ---------------------------------------------------------------- kernel log ------------------

gpu::GpuFacts gpu_at(int index, const std::string& bus) {
  gpu::GpuFacts g;
  g.index = index;
  g.host = "node7";
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_bus_id = bus;
  return g;
}

const std::vector<gpu::GpuFacts> kTwoGpus = {gpu_at(0, "00000000:18:00.0"), gpu_at(1, "00000000:3B:00.0")};

TEST(HealthLevel1KernelLog, TheWhitelistIsTheApplicationCausedXids) {
  EXPECT_EQ(harmless_xids(), (std::vector<int>{13, 31, 43, 45}));
  for (int code : {13, 31, 43, 45}) EXPECT_EQ(xid_severity(code), XidSeverity::Harmless) << code;
  for (int code : {48, 64, 74, 79, 95, 119, 120}) EXPECT_EQ(xid_severity(code), XidSeverity::Critical) << code;
  for (int code : {63, 92, 94, 999}) EXPECT_EQ(xid_severity(code), XidSeverity::Warn) << code;
}

TEST(HealthLevel1KernelLog, AWhitelistedXidIsOkAndNamesItsCode) {
  const std::vector<std::string> lines = {
      "NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)",
      "NVRM: Xid (PCI:0000:18:00): 43, pid=4242, name=python, Ch 00000008",
      "NVRM: Xid (PCI:0000:3b:00): 31, pid=99, name=train, channel 0x00000002, intr 10000000. MMU Fault"};
  const auto rows = kernel_log_checks(lines, true, kTwoGpus);
  const Check& gpu0 = row(rows, "gpu0 xid");
  EXPECT_EQ(gpu0.state, State::Ok) << dump(rows);
  EXPECT_TRUE(has(gpu0.value, "13 x1 (graphics engine exception, application-caused)")) << gpu0.value;
  EXPECT_TRUE(has(gpu0.value, "43 x1 (GPU stopped processing, application-caused)")) << gpu0.value;
  EXPECT_TRUE(has(gpu0.value, "whitelisted")) << gpu0.value;
  EXPECT_EQ(row(rows, "gpu1 xid").state, State::Ok) << dump(rows);
  EXPECT_TRUE(gpu0.reason.empty() && gpu0.remediation.empty()) << dump(rows);
  EXPECT_EQ(row(rows, "machine checks").state, State::Ok) << dump(rows);
}

TEST(HealthLevel1KernelLog, Xid79IsCriticalOnItsOwnGpuNamingItsBusId) {
  const std::vector<std::string> lines = {
      "NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, Graphics Exception",
      "NVRM: GPU at PCI:0000:3b:00: GPU-1b2c3d4e",
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.",
      "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."};
  const auto rows = kernel_log_checks(lines, true, kTwoGpus);
  const Check& gpu1 = row(rows, "gpu1 xid");
  EXPECT_EQ(gpu1.state, State::Critical) << dump(rows);
  EXPECT_TRUE(has(gpu1.value, "PCI 00000000:3B:00.0")) << gpu1.value;
  EXPECT_TRUE(has(gpu1.value, "79 x1 (GPU has fallen off the bus)")) << gpu1.value;
  EXPECT_EQ(gpu1.reason, "gpu1 XID 79");
  EXPECT_TRUE(has(gpu1.remediation, "nvidia-smi -r")) << gpu1.remediation;
  EXPECT_EQ(row(rows, "gpu0 xid").state, State::Ok) << dump(rows);  // its XID 13 is the application's
  ASSERT_EQ(gpu1.metrics.size(), 1u);
  EXPECT_EQ(gpu1.metrics[0].name, "ddx_health_gpu_xid_events");
  EXPECT_EQ(gpu1.metrics[0].labels.at("xid"), "79");
}

TEST(HealthLevel1KernelLog, DegradedXidsWarnAndAGpuNvmlNoLongerListsGetsItsOwnRow) {
  const std::vector<std::string> lines = {
      "NVRM: Xid (PCI:0000:18:00): 94, pid=77, name=python, Contained: SM (0x1). RST: No, D-RST: No",
      "NVRM: Xid (PCI:0000:af:00): 79, pid=0, GPU has fallen off the bus."};
  const auto rows = kernel_log_checks(lines, true, kTwoGpus);
  EXPECT_EQ(row(rows, "gpu0 xid").state, State::Warn) << dump(rows);
  EXPECT_EQ(row(rows, "gpu0 xid").reason, "gpu0 XID 94");
  const Check& lost = row(rows, "xid 0000:af:00");
  EXPECT_EQ(lost.state, State::Critical) << dump(rows);
  EXPECT_TRUE(has(lost.value, "a device NVML does not list")) << lost.value;
  // Per GPU first, in the order of the GPUs, then the others, then machine checks.
  ASSERT_EQ(rows.size(), 4u) << dump(rows);
  EXPECT_EQ(rows[0].name, "gpu0 xid");
  EXPECT_EQ(rows[1].name, "gpu1 xid");
  EXPECT_EQ(rows[3].name, "machine checks");
}

TEST(HealthLevel1KernelLog, MachineCheckLinesAreClassifiedByWhatTheKernelSays) {
  const std::map<std::string, MachineCheck> lines = {
      {"mce: [Hardware Error]: Machine check events logged", MachineCheck::Corrected},
      // Status 8c00...: VAL set, UC (bit 61) clear.
      {"mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: 8c00004000010090", MachineCheck::Corrected},
      // Status b200...: UC set.
      {"mce: [Hardware Error]: CPU 0: Machine Check Exception: 5 Bank 4: b200000000070f0f", MachineCheck::Uncorrected},
      {"mce: [Hardware Error]: TSC 0 ADDR fef1a140 MISC d012000100000086", MachineCheck::None},
      {"EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0)", MachineCheck::Corrected},
      {"EDAC MC1: 1 UE memory read error on CPU_SrcID#1_Ha#0_Chan#0_DIMM#1", MachineCheck::Uncorrected},
      {"EDAC skx MC2: HANDLING MCE MEMORY ERROR", MachineCheck::None},
      {"EDAC MC: Ver: 3.0.0", MachineCheck::None},
      {"{1}[Hardware Error]: event severity: corrected", MachineCheck::Corrected},
      {"{2}[Hardware Error]: event severity: fatal", MachineCheck::Uncorrected},
      {"{3}[Hardware Error]: event severity: recoverable", MachineCheck::Uncorrected},
      {"Memory failure: 0x1a2b3c: recovery action for dirty LRU page: Recovered", MachineCheck::Uncorrected},
      {"mce: CPU0: Thermal monitoring enabled (TM1)", MachineCheck::None},
      {"RAS: Correctable Errors collector initialized.", MachineCheck::None}};
  for (const auto& [line, kind] : lines) EXPECT_EQ(classify_machine_check(line), kind) << line;
}

TEST(HealthLevel1KernelLog, CorrectedMachineChecksWarnAndUncorrectedAreCritical) {
  std::vector<std::string> lines = {"EDAC MC: Ver: 3.0.0",
                                    "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0",
                                    "mce: [Hardware Error]: Machine check events logged"};
  auto rows = kernel_log_checks(lines, true, {});
  Check mc = row(rows, "machine checks");
  EXPECT_EQ(mc.state, State::Warn) << dump(rows);
  EXPECT_TRUE(has(mc.value, "2 corrected machine-check messages since boot, first: 'EDAC MC0: 1 CE memory read"))
      << mc.value;
  EXPECT_EQ(mc.reason, "corrected machine checks");
  lines.push_back("EDAC MC1: 1 UE memory read error on CPU_SrcID#1_Ha#0_Chan#0_DIMM#1");
  rows = kernel_log_checks(lines, true, {});
  mc = row(rows, "machine checks");
  EXPECT_EQ(mc.state, State::Critical) << dump(rows);
  EXPECT_TRUE(has(mc.value, "1 uncorrected and 2 corrected")) << mc.value;
  EXPECT_TRUE(has(mc.value, "'EDAC MC1: 1 UE")) << mc.value;
  EXPECT_EQ(mc.reason, "uncorrected machine check");
  EXPECT_EQ(row(kernel_log_checks({"EDAC MC: Ver: 3.0.0"}, true, {}), "machine checks").state, State::Ok);
}

TEST(HealthLevel1KernelLog, AnUnreadableLogWarnsWithHowToReadItAndSkipsTheXidRows) {
  const auto rows = kernel_log_checks({}, false, kTwoGpus);
  const Check& mc = row(rows, "machine checks");
  EXPECT_EQ(mc.state, State::Warn) << dump(rows);
  EXPECT_TRUE(has(mc.remediation, "kernel.dmesg_restrict=0")) << mc.remediation;
  EXPECT_TRUE(row(rows, "gpu0 xid").skipped) << dump(rows);
  EXPECT_TRUE(row(rows, "gpu1 xid").skipped) << dump(rows);
}

// ---------------------------------------------------------------- paths -----------------------

PathProbe space(double size_gib, double free_gib, uint64_t inodes = 1000000, uint64_t free_inodes = 900000) {
  PathProbe p;
  p.size_bytes = static_cast<uint64_t>(size_gib * (1ULL << 30));
  p.free_bytes = static_cast<uint64_t>(free_gib * (1ULL << 30));
  p.total_inodes = inodes;
  p.free_inodes = free_inodes;
  return p;
}

TEST(HealthLevel1Paths, SpaceAndInodeThresholds) {
  EXPECT_EQ(judge_path("/ckpt", space(1000, 500)).state, State::Ok);
  // Under the 10 GiB floor, or under 5 %: WARN.
  EXPECT_EQ(judge_path("/ckpt", space(100, 8)).state, State::Warn);
  EXPECT_EQ(judge_path("/ckpt", space(10000, 300)).state, State::Warn);  // 3 %
  EXPECT_EQ(judge_path("/ckpt", space(10000, 300)).reason, "low space /ckpt");
  // Under the 1 GiB floor, or under 1 %: CRITICAL, "full".
  const Check full = judge_path("/ckpt", space(100, 0.5));
  EXPECT_EQ(full.state, State::Critical) << full.value;
  EXPECT_EQ(full.reason, "full /ckpt");
  EXPECT_TRUE(has(full.value, "0.5 GiB free of 100.0 GiB (0.5%)")) << full.value;
  EXPECT_EQ(judge_path("/lustre", space(1000000, 5000)).state, State::Critical);  // 0.5 % of a large file system
  // Inodes: by fraction, where the file system counts them.
  EXPECT_EQ(judge_path("/ckpt", space(1000, 500, 1000000, 30000)).state, State::Warn);
  const Check no_inodes = judge_path("/ckpt", space(1000, 500, 1000000, 5000));
  EXPECT_EQ(no_inodes.state, State::Critical);
  EXPECT_EQ(no_inodes.reason, "no inodes /ckpt");
  const Check uncounted = judge_path("/ckpt", space(1000, 500, 0, 0));
  EXPECT_EQ(uncounted.state, State::Ok);
  EXPECT_TRUE(has(uncounted.value, "inodes not counted")) << uncounted.value;
  // The figures as metrics, not judged by a baseline.
  const Check ok = judge_path("/ckpt", space(1000, 500));
  ASSERT_EQ(ok.metrics.size(), 2u);
  EXPECT_EQ(ok.metrics[0].name, "ddx_health_path_free_bytes");
  EXPECT_EQ(ok.metrics[0].value, 500.0 * (1ULL << 30));
  EXPECT_EQ(ok.metrics[0].labels.at("path"), "/ckpt");
  EXPECT_EQ(ok.metrics[1].name, "ddx_health_path_free_inodes");
  EXPECT_EQ(ok.metrics[1].value, 900000);
  EXPECT_FALSE(ok.metrics[0].judged || ok.metrics[1].judged);
}

TEST(HealthLevel1Paths, AMissingFolderOrAFileIsCriticalAndARealFolderShowsItsFigures) {
  Scratch scratch("paths");
  const std::string file = scratch.write("a-file", "x");
  const std::string missing = scratch.path() + "/gone";
  const auto rows = path_checks({scratch.path(), missing, file});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "path " + scratch.path());
  EXPECT_EQ(rows[1].state, State::Critical) << dump(rows);
  EXPECT_EQ(rows[1].value, missing + ": missing");
  EXPECT_EQ(rows[1].reason, "missing " + missing);
  EXPECT_EQ(rows[2].state, State::Critical) << dump(rows);
  EXPECT_EQ(rows[2].value, file + ": not a directory");
  // The real folder: statvfs's own figures.
  struct statvfs fs {};
  ASSERT_EQ(::statvfs(scratch.path().c_str(), &fs), 0);
  ASSERT_FALSE(rows[0].metrics.empty()) << dump(rows);
  const double free_bytes = static_cast<double>(fs.f_bavail) * fs.f_frsize;
  EXPECT_NEAR(rows[0].metrics[0].value, free_bytes, 64.0 * (1 << 20)) << dump(rows);  // others write meanwhile
  EXPECT_EQ(rows[0].state, judge_path(scratch.path(), probe_path(scratch.path())).state);
}

TEST(HealthLevel1Paths, AReadOnlyMountAndAFolderThisUserCannotWriteAreCritical) {
  Scratch scratch("ro");
  std::string skip;
  const auto read_only = in_child(
      [&] {
        if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
          return std::string("SKIP: no private mount namespace here");
        }
        if (::mount("tmpfs", scratch.path().c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) {
          return std::string("SKIP: cannot mount a tmpfs");
        }
        return probe_path(scratch.path()).error;
      },
      skip);
  if (read_only) {
    EXPECT_EQ(*read_only, "read-only file system");
  } else {
    std::cout << "read-only case skipped: " << skip << "\n";
  }
  const auto unwritable = in_child(
      [&] {
        if (::geteuid() != 0) return std::string("SKIP: not root, cannot become another user");
        fs::permissions(scratch.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                            fs::perms::others_read | fs::perms::others_exec);
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) return std::string("SKIP: setuid refused");
        return probe_path(scratch.path()).error;
      },
      skip);
  if (unwritable) {
    EXPECT_TRUE(has(*unwritable, "not writable by uid 65534")) << *unwritable;
  } else {
    std::cout << "unwritable case skipped: " << skip << "\n";
  }
  // Both cases need root (a mount namespace, another uid): refused, each is said above; as root
  // in CI (DDX_REQUIRE_PRIVILEGED_TESTS=1) a refusal fails instead, so a green run hides none.
  if (!read_only || !unwritable) {
    if (ddx::testing::privileged_tests_required()) ADD_FAILURE() << "refused although DDX_REQUIRE_PRIVILEGED_TESTS=1: " << skip;
    if (!read_only && !unwritable) GTEST_SKIP() << skip;
  }
}

// ---------------------------------------------------------------- node rows -------------------

TEST(HealthLevel1Node, TheDoctorsNodeRowsAreKeptRenamedAndTheRendezvousRowsLeftOut) {
  std::vector<doctor::CheckRow> doctor_rows;
  const std::vector<std::string> kept = {"/dev/shm vs local ranks", "ulimit -n (open files)", "ulimit -l (locked memory)",
                                         "ulimit -c (core dumps)",  "same versions on every rank",
                                         "same CPU kernels on every rank", "GPUs vs local ranks",
                                         "free disk at the save folder", "CPU governor and NUMA"};
  for (const auto& name : kept) doctor_rows.push_back({name, doctor::Status::Pass, "fine", ""});
  for (const auto& name : doctor_rows_left_out()) doctor_rows.push_back({name, doctor::Status::Fail, "bad", "fix"});
  doctor_rows[0] = {"/dev/shm vs local ranks", doctor::Status::Fail, "a: 64.0 MiB free", "docker run --shm-size=2g"};
  doctor_rows[3] = {"ulimit -c (core dumps)", doctor::Status::Warn, "0", "ulimit -c unlimited"};
  doctor_rows[6] = {"GPUs vs local ranks", doctor::Status::Skip, "skipped: no GPU", ""};
  const auto rows = doctor_node_rows(doctor_rows);
  std::vector<std::string> names;
  for (const auto& r : rows) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"shm", "ulimit nofile", "ulimit memlock", "ulimit core", "versions",
                                             "cpu kernels", "gpus vs local ranks", "disk", "cpu governor"}));
  EXPECT_EQ(rows[0].state, State::Critical);
  EXPECT_EQ(rows[0].remediation, "docker run --shm-size=2g");
  EXPECT_EQ(rows[0].reason, "/dev/shm short for the local ranks");
  EXPECT_EQ(rows[3].state, State::Warn);
  EXPECT_EQ(rows[3].remediation, "ulimit -c unlimited");
  EXPECT_TRUE(rows[6].skipped);
  EXPECT_EQ(rows[6].value, "skipped: no GPU");
  EXPECT_EQ(rows[1].state, State::Ok);
  EXPECT_TRUE(rows[1].reason.empty());
}

// Every row the doctor judges today is either kept or left out on purpose: a new doctor row
// makes this fail until someone decides where it goes.
TEST(HealthLevel1Node, EveryDoctorRowIsKeptOrLeftOutOnPurpose) {
  NodeFacts node;
  node.host = "node7";
  const auto kept = doctor_checks_of_node(node, {});
  doctor::FactsInput input;
  input.info.hostname = "node7";
  input.resolve_hostname = false;
  const auto all = doctor::evaluate({doctor::collect_facts({}, input)});
  size_t left_out = 0;
  for (const auto& r : all) {
    for (const auto& name : doctor_rows_left_out()) left_out += r.name == name ? 1 : 0;
  }
  EXPECT_EQ(kept.size() + left_out, all.size()) << dump(kept);
  EXPECT_EQ(left_out, doctor_rows_left_out().size());
}

TEST(HealthLevel1Node, AShmTooSmallForTheLocalRanksIsCriticalWithGpus) {
  NodeFacts node;
  node.host = "node7";
  node.gpus = 4;
  node.local_ranks = 4;
  EXPECT_EQ(row(doctor_checks_of_node(node, {}), "shm").state, State::Ok);
  // NCCL's SHM transport needs ranks x peers x channels segments: 1024 local ranks need about
  // 18 TiB, more than any /dev/shm has.
  node.local_ranks = 1024;
  const auto rows = doctor_checks_of_node(node, {});
  const Check& shm = row(rows, "shm");
  EXPECT_EQ(shm.state, State::Critical) << dump(rows);
  EXPECT_TRUE(has(shm.value, "1024 local ranks need")) << shm.value;
  EXPECT_TRUE(has(shm.remediation, "--shm-size")) << shm.remediation;
  node.gpus = 0;  // Gloo does not use /dev/shm: a CPU node runs
  EXPECT_EQ(row(doctor_checks_of_node(node, {}), "shm").state, State::Warn);
}

TEST(HealthLevel1Node, AMissingShmFolderIsUnknownNotAnException) {
  NodeFacts node;
  node.shm_path = "/nonexistent/shm";
  const auto rows = doctor_checks_of_node(node, {});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, State::Unknown);
  EXPECT_TRUE(has(rows[0].value, "/nonexistent/shm")) << rows[0].value;
}

TEST(HealthLevel1Node, MemoryBelowFivePercentWarns) {
  Scratch scratch("meminfo");
  const auto meminfo = [&](int available_kib) {
    return scratch.write("meminfo", "MemTotal:       10000000 kB\nMemFree:  100 kB\nMemAvailable:   " +
                                        std::to_string(available_kib) + " kB\n");
  };
  const Check ok = judge_memory(read_memory(meminfo(6000000)));
  EXPECT_EQ(ok.state, State::Ok) << ok.value;
  EXPECT_EQ(ok.value, "5.7 GiB available of 9.5 GiB (60.0%)");
  ASSERT_EQ(ok.metrics.size(), 1u);
  EXPECT_EQ(ok.metrics[0].value, 6000000.0 * 1024);
  const Check low = judge_memory(read_memory(meminfo(400000)));
  EXPECT_EQ(low.state, State::Warn) << low.value;
  EXPECT_EQ(low.reason, "little memory available");
  EXPECT_EQ(judge_memory(read_memory(scratch.path() + "/none")).state, State::Unknown);
}

TEST(HealthLevel1Node, AnUnsynchronisedClockOrALargeErrorWarns) {
  ClockFacts clock;
  clock.synchronised = true;
  clock.max_error_us = 5000;
  clock.estimated_error_us = 200;
  Check c = judge_clock(clock);
  EXPECT_EQ(c.state, State::Ok);
  EXPECT_EQ(c.value, "synchronised (maximum error 5.0 ms, estimated 0.2 ms)");
  clock.max_error_us = 250000;
  c = judge_clock(clock);
  EXPECT_EQ(c.state, State::Warn);
  EXPECT_TRUE(has(c.value, "250.0 ms")) << c.value;
  clock.synchronised = false;
  c = judge_clock(clock);
  EXPECT_EQ(c.state, State::Warn);
  EXPECT_TRUE(has(c.value, "STA_UNSYNC")) << c.value;
  EXPECT_EQ(c.reason, "clock not synchronised");
  clock.error = "adjtimex: Operation not permitted";
  EXPECT_TRUE(judge_clock(clock).skipped);
  // This machine's kernel answers (read only, no privilege needed).
  EXPECT_EQ(read_clock().error, "");
}

// ---------------------------------------------------------------- GPUs ------------------------

gpu::GpuFacts retired(unsigned single, unsigned dbl, bool pending) {
  gpu::GpuFacts g = gpu_at(3, "00000000:48:00.0");
  g.retired_pages_single_bit = single;
  g.retired_pages_double_bit = dbl;
  g.retired_pages_pending = pending;
  return g;
}

TEST(HealthLevel1Gpus, RetiredPagesAtDcgmsLimitsAndPending) {
  EXPECT_EQ(judge_retired_pages(retired(2, 0, false)).state, State::Ok);
  const Check at_limit = judge_retired_pages(retired(50, 13, false));
  EXPECT_EQ(at_limit.state, State::Critical) << at_limit.value;
  EXPECT_EQ(at_limit.reason, "gpu3 63 retired pages");
  EXPECT_EQ(judge_retired_pages(retired(50, 12, false)).state, State::Ok);
  const Check double_bit = judge_retired_pages(retired(1, 16, false));
  EXPECT_EQ(double_bit.state, State::Warn) << double_bit.value;
  EXPECT_TRUE(has(double_bit.value, "17 pages retired (1 after single-bit, 16 after double-bit errors)")) << double_bit.value;
  EXPECT_EQ(judge_retired_pages(retired(16, 1, false)).state, State::Ok);  // the causes matter
  const Check pending = judge_retired_pages(retired(0, 1, true));
  EXPECT_EQ(pending.state, State::Warn);
  EXPECT_EQ(pending.reason, "gpu3 page retirement pending");
  EXPECT_TRUE(judge_retired_pages(gpu_at(0, "00000000:18:00.0")).skipped);  // Ampere and later
}

TEST(HealthLevel1Gpus, PcieReplaysAboveEightAMinuteWarn) {
  gpu::GpuFacts g = gpu_at(2, "00000000:38:00.0");
  EXPECT_TRUE(judge_pcie_replays(g, 3600).skipped);
  g.pcie_replays = 480;  // 8 a minute over an hour: at the limit, not over it
  EXPECT_EQ(judge_pcie_replays(g, 3600).state, State::Ok);
  g.pcie_replays = 481;
  const Check over = judge_pcie_replays(g, 3600);
  EXPECT_EQ(over.state, State::Warn) << over.value;
  EXPECT_EQ(over.reason, "gpu2 PCIe replays");
  EXPECT_EQ(judge_pcie_replays(g, 86400).state, State::Ok);  // the same count over a day
  ASSERT_EQ(over.metrics.size(), 1u);
  EXPECT_EQ(over.metrics[0].value, 481);
}

TEST(HealthLevel1Gpus, TheDriverMustSeeEveryNvidiaGpuOnThePciBus) {
  EXPECT_TRUE(gpu_count_check(0, 0, "no NVIDIA driver (libnvidia-ml.so.1: cannot open)", "").skipped);
  const Check no_driver = gpu_count_check(0, 8, "nvmlInit failed: Driver Not Loaded (9)", "");
  EXPECT_EQ(no_driver.state, State::Critical);
  EXPECT_EQ(no_driver.value, "8 NVIDIA GPUs on the PCI bus, but NVML cannot be used: nvmlInit failed: Driver Not Loaded (9)");
  const Check lost = gpu_count_check(7, 8, "", "580.65.06");
  EXPECT_EQ(lost.state, State::Critical);
  EXPECT_EQ(lost.reason, "GPU missing (7 of 8)");
  EXPECT_EQ(gpu_count_check(8, 8, "", "580.65.06").value, "8 GPUs, driver 580.65.06");
  EXPECT_TRUE(gpu_count_check(0, 0, "", "580.65.06").skipped);

  Scratch sysfs("sysfs");
  for (const auto& [device, vendor, klass] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"0000:18:00.0", "0x10de", "0x030200"},  // a 3D controller (H100)
           {"0000:19:00.0", "0x10de", "0x030000"},  // a VGA one
           {"0000:1a:00.0", "0x10de", "0x068000"},  // an NVSwitch: a bridge, not a GPU
           {"0000:1b:00.0", "0x8086", "0x030000"}}) {
    sysfs.write("bus/pci/devices/" + device + "/vendor", vendor + "\n");
    sysfs.write("bus/pci/devices/" + device + "/class", klass + "\n");
  }
  EXPECT_EQ(nvidia_gpus_on_pci_bus(sysfs.path()), 2);
  EXPECT_EQ(nvidia_gpus_on_pci_bus(sysfs.path() + "/none"), 0);
}

// The fake NVML (tests/fake_nvml) through DDX_NVML_LIBRARY, as the real driver would be loaded.
class FakeNvml {
 public:
  explicit FakeNvml(const std::string& scenario, const std::string& library = FAKE_NVML) {
    ::setenv("DDX_NVML_LIBRARY", library.c_str(), 1);
    ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  }
  ~FakeNvml() {
    ::unsetenv("DDX_NVML_LIBRARY");
    ::unsetenv("FAKE_NVML_SCENARIO");
  }
};

// Options that keep this machine's /dev/shm and PCI bus out of the verdict: a folder on the
// build's disk as /dev/shm (4 local ranks need 221 MiB), an empty sysfs (no NVIDIA GPU on the bus).
Level1Options isolated(const Scratch& scratch) {
  Level1Options o;
  o.shm_path = scratch.path();
  fs::create_directories(scratch.path() + "/sys");
  o.sysfs_root = scratch.path() + "/sys";
  return o;
}

// Each GPU row's state, the xid rows left out (they follow this machine's kernel log).
std::map<std::string, std::string> gpu_states(const std::vector<Check>& rows) {
  std::map<std::string, std::string> states;
  for (const auto& r : rows) {
    if (r.name.rfind("gpu", 0) == 0 && r.name.find(" xid") == std::string::npos && r.name != "gpus vs local ranks" &&
        r.name != "gpus") {
      states[r.name] = r.skipped ? "skipped" : to_string(r.state);
    }
  }
  return states;
}

const char* const kGpuChecks[] = {"ecc",         "row remapping", "clocks",        "pcie",        "nvlink",
                                  "temperature", "power",         "retired pages", "pcie replays"};

std::map<std::string, std::string> all_ok() {
  std::map<std::string, std::string> states;
  for (int g = 0; g < 4; ++g) {
    for (const char* check : kGpuChecks) states["gpu" + std::to_string(g) + " " + check] = "OK";
  }
  return states;
}

TEST(HealthLevel1FakeNvml, AHealthyNodeHasNothingCritical) {
  Scratch scratch("healthy");
  FakeNvml nvml("healthy");
  const auto rows = level1_checks(isolated(scratch), {});
  for (const auto& r : rows) EXPECT_NE(r.state, State::Critical) << dump(rows);
  EXPECT_EQ(gpu_states(rows), all_ok()) << dump(rows);
  EXPECT_EQ(row(rows, "gpus").value, "4 GPUs, driver 580.65.06-fake");
  EXPECT_EQ(row(rows, "gpus vs local ranks").state, State::Ok) << dump(rows);
  EXPECT_TRUE(has(row(rows, "shm").value, "4 local ranks need")) << dump(rows);  // local ranks: the GPUs NVML sees
  EXPECT_TRUE(has(row(rows, "versions").value, "nvidia driver 580.65.06-fake")) << dump(rows);
  EXPECT_TRUE(has(row(rows, "gpu1 retired pages").value, "2 pages retired (2 after single-bit, 0 after double-bit errors), none pending"))
      << dump(rows);
  EXPECT_TRUE(has(row(rows, "gpu3 pcie replays").value, ": 3 replays since the driver loaded")) << dump(rows);
  EXPECT_EQ(node_device_model(isolated(scratch)), "NVIDIA H100 80GB HBM3 (fake)");
}

TEST(HealthLevel1FakeNvml, PlantedFaultsAreCriticalOnTheirOwnGpusWithRetiredPagesAndReplays) {
  Scratch scratch("faults");
  FakeNvml nvml("faults");
  const auto rows = level1_checks(isolated(scratch), {});
  auto expected = all_ok();
  expected["gpu0 ecc"] = "WARN";            // old lifetime errors
  expected["gpu0 temperature"] = "WARN";    // near slowdown
  expected["gpu0 retired pages"] = "CRITICAL";  // 66 >= 63
  expected["gpu1 clocks"] = "CRITICAL";     // hardware slowdown
  expected["gpu1 row remapping"] = "WARN";  // pending
  expected["gpu1 retired pages"] = "WARN";  // a retirement pending
  expected["gpu2 pcie"] = "CRITICAL";       // x8 of x16
  expected["gpu2 nvlink"] = "CRITICAL";     // a link down
  expected["gpu2 pcie replays"] = "WARN";   // 3e9 replays
  expected["gpu3 ecc"] = "CRITICAL";        // uncorrected since the driver loaded
  expected["gpu3 retired pages"] = "WARN";  // 16 after double-bit errors
  EXPECT_EQ(gpu_states(rows), expected) << dump(rows);
  EXPECT_EQ(row(rows, "gpu0 retired pages").reason, "gpu0 66 retired pages");
  EXPECT_EQ(row(rows, "gpu1 clocks").reason, "gpu1 clocks held down");
  EXPECT_EQ(row(rows, "gpu2 pcie").reason, "gpu2 PCIe link degraded");
  EXPECT_EQ(row(rows, "gpu3 ecc").reason, "gpu3 uncorrected ECC errors");
  EXPECT_TRUE(has(row(rows, "gpu3 ecc").remediation, "nvidia-smi -r")) << dump(rows);
  EXPECT_TRUE(has(row(rows, "gpu2 pcie replays").value, "3000000000 replays since the driver loaded")) << dump(rows);
  EXPECT_TRUE(has(row(rows, "gpu1 retired pages").value, "a retirement pending")) << dump(rows);
}

TEST(HealthLevel1FakeNvml, NoDriverIsOneSkippedRowAndACpuNodeIsFine) {
  Scratch scratch("nodriver");
  FakeNvml nvml("healthy", scratch.path() + "/libnvidia-ml.so.1");
  auto rows = level1_checks(isolated(scratch), {});
  const Check& gpus = row(rows, "gpus");
  EXPECT_TRUE(gpus.skipped) << dump(rows);
  EXPECT_TRUE(has(gpus.value, "no NVIDIA GPU: no NVIDIA driver (")) << gpus.value;
  EXPECT_TRUE(gpu_states(rows).empty()) << dump(rows);
  EXPECT_TRUE(row(rows, "gpus vs local ranks").skipped) << dump(rows);
  for (const auto& r : rows) EXPECT_NE(r.state, State::Critical) << dump(rows);
  // The same with NVIDIA GPUs on the PCI bus: their driver is missing.
  Level1Options with_gpus = isolated(scratch);
  scratch.write("sys/bus/pci/devices/0000:18:00.0/vendor", "0x10de\n");
  scratch.write("sys/bus/pci/devices/0000:18:00.0/class", "0x030200\n");
  rows = level1_checks(with_gpus, {});
  EXPECT_EQ(row(rows, "gpus").state, State::Critical) << dump(rows);
  EXPECT_EQ(row(rows, "gpus").reason, "NVIDIA driver not working");
}

TEST(HealthLevel1FakeNvml, ADriverThatDoesNotInitialiseIsSkippedOnACpuNode) {
  Scratch scratch("initfails");
  FakeNvml nvml("init-fails");
  const auto rows = level1_checks(isolated(scratch), {});
  EXPECT_TRUE(row(rows, "gpus").skipped) << dump(rows);
  EXPECT_TRUE(has(row(rows, "gpus").value, "nvmlInit failed: Driver Not Loaded (9)")) << dump(rows);
}

TEST(HealthLevel1FakeNvml, TheRowsComeInAFixedOrder) {
  Scratch scratch("order");
  FakeNvml nvml("healthy");
  Level1Options options = isolated(scratch);
  options.paths = {scratch.path(), scratch.path() + "/gone"};
  const auto rows = level1_checks(options, {});
  std::vector<std::string> names;
  for (const auto& r : rows) names.push_back(r.name);
  std::vector<std::string> expected = {"shm", "ulimit nofile", "ulimit memlock", "ulimit core", "versions",
                                       "cpu kernels", "gpus vs local ranks", "disk", "cpu governor", "memory", "clock",
                                       "gpus"};
  for (int g = 0; g < 4; ++g) {
    for (const char* check : kGpuChecks) expected.push_back("gpu" + std::to_string(g) + " " + check);
    expected.push_back("gpu" + std::to_string(g) + " xid");
  }
  // The machine's own log may name devices the fake does not list ("xid <device>" rows).
  std::vector<std::string> tail(names.begin() + std::min(names.size(), expected.size()), names.end());
  names.resize(std::min(names.size(), expected.size()));
  EXPECT_EQ(names, expected) << dump(rows);
  ASSERT_GE(tail.size(), 3u) << dump(rows);
  EXPECT_EQ(tail[tail.size() - 3], "machine checks");
  EXPECT_EQ(tail[tail.size() - 2], "path " + scratch.path());
  EXPECT_EQ(tail.back(), "path " + scratch.path() + "/gone");
}

// A real small /dev/shm (a 64 MiB tmpfs in a private mount namespace, as a container's) with the
// fake NVML's 4 GPUs: the doctor's row is CRITICAL and says what the 4 local ranks need.
TEST(HealthLevel1FakeNvml, ARealSmallDevShmIsCritical) {
  // A private mount namespace needs root: skipped without it, a failure in CI (as root).
  DDX_SKIP_IF_REFUSED(shm::private_dev_shm_refused());
  Scratch scratch("smallshm");
  std::string skip;
  const auto shm_row = in_child(
      [&] {
        if (const std::string why = shm::shrink_dev_shm(64ULL << 20); !why.empty()) return "SKIP: " + why;
        FakeNvml nvml("healthy");
        Level1Options options = isolated(scratch);
        options.shm_path = "/dev/shm";
        const Check shm = row(level1_checks(options, {}), "shm");
        return std::string(to_string(shm.state)) + "|" + shm.value + "|" + shm.reason;
      },
      skip);
  if (!shm_row) DDX_SKIP_IF_REFUSED(skip.empty() ? std::string("the child gave no answer") : skip);
  EXPECT_TRUE(has(*shm_row, "CRITICAL|")) << *shm_row;
  EXPECT_TRUE(has(*shm_row, ": 64.0 MiB free, 4 local ranks need 220.6 MiB|/dev/shm short for the local ranks")) << *shm_row;
}

// Level 1 on this machine as it is: every row named once, nothing thrown, the sections present.
// (Its time is in docs/health.md, not asserted here.)
TEST(HealthLevel1, OnThisMachine) {
  Level1Options options;
  options.paths = {fs::temp_directory_path().string()};
  const auto rows = level1_checks(options, current_env());
  std::map<std::string, int> seen;
  for (const auto& r : rows) {
    EXPECT_EQ(++seen[r.name], 1) << "row named twice: " << r.name;
    EXPECT_FALSE(r.value.empty()) << r.name;
    if (r.state != State::Ok && !r.skipped) EXPECT_FALSE(r.reason.empty()) << r.name;
  }
  for (const char* name : {"shm", "memory", "clock", "gpus", "machine checks"}) EXPECT_TRUE(has_row(rows, name)) << name;
  EXPECT_TRUE(has_row(rows, "path " + fs::temp_directory_path().string()));
  std::cout << dump(rows);
  std::cout << "device model: " << node_device_model(options) << "\n";
}

}  // namespace
}  // namespace ddx::health
