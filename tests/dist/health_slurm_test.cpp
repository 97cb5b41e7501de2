// `ddx health` under a real SLURM (slurm_cluster.h: a slurmctld and a slurmd on each of two
// simulated hosts), run by the shipped examples/slurm/ scripts exactly as an operator installs
// them: ddx-health-check.sh as HealthCheckProgram, prolog.sh as Prolog. A fault planted on host b
// alone (a full scratch disk, an XID 79 in its kernel log, a faulty GPU through the fake NVML, a
// wrong element in the known-answer GEMM) drains host b with ddx's reason in `sinfo -R` while host
// a stays idle; once cleared, host b is resumed, but a node an operator drained stays drained; a
// job the scheduler sends to the bad node is requeued by the failing Prolog and runs on the good
// one; a ddx that cannot run leaves the node in service and the script exits 3. Label `slurm`.
//
// Both hosts run on this one machine, so each picks its own configuration by node name: the
// program slurm.conf names is a small wrapper (per_host_wrapper) that sets DDX_HEALTH_CONFIG to
// <dir>/health-<node>.conf and runs the shipped script, logging its exit code and last line.
// What only host b sees (a tmpfs over its scratch folder, a kernel log) is mounted inside its
// slurmd's mount namespace, which every script that slurmd runs shares and which dies with it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process_helpers.h"
#include "slurm_cluster.h"

namespace ddx::testing {
namespace {

const std::string kExamples = std::string(DDX_SOURCE_DIR) + "/examples/slurm";
const char* const kHostA = "ddx-host-a";
const char* const kHostB = "ddx-host-b";

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

void write_atomically(const std::string& path, const std::string& text, mode_t mode = 0644) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
  }
  ::chmod(tmp.c_str(), mode);
  std::filesystem::rename(tmp, path);
}

// One run of a shipped script on a node, as the wrapper logged it.
struct ScriptRun {
  int rc = -1;
  std::string job;      // the Prolog's job id ("" for the health check)
  std::string verdict;  // the script's last line of output
};

// A node as `sinfo -N` shows it.
struct NodeView {
  std::string state;   // %T: idle, drained, draining, mixed, allocated, ...
  std::string reason;  // %E: "none" when there is none
};

class HealthSlurm : public ::testing::Test {
 protected:
  // Both hosts' configurations (healthy) and scratch folders, before any cluster: a node's
  // first check runs as its slurmd starts.
  void SetUp() override {
    dir_ = scratch_dir("health-slurm", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_stale_short_dirs();
    short_dir_ = std::string(kShortDirPrefix) + std::to_string(::getpid());
    std::filesystem::remove_all(short_dir_);
    for (const char* node : {kHostA, kHostB}) {
      std::filesystem::create_directories(scratch(node));
      write_host_config(node);
    }
  }

  // The cluster with these slurm.conf lines (the health check's or the Prolog's).
  void start_cluster(const std::string& extra_config) {
    cluster_ = std::make_unique<SlurmCluster>(dir_, SlurmTimeouts{}, extra_config);
    DDX_SKIP_IF_REFUSED(cluster_->refused());
    ASSERT_TRUE(cluster_->failed().empty()) << cluster_->failed();
  }

  void TearDown() override {
    if (cluster_ && cluster_->refused().empty() && cluster_->failed().empty()) {
      // The scripts slurmd keeps starting end here; a run still going must end by itself.
      for (const char* script : {"ddx-health-check.sh", "prolog.sh"}) write_atomically(dir_ + "/stop-" + script, "");
      const auto left = cluster_->tasks_left(std::chrono::seconds(60));
      std::string names;
      for (const auto& p : left) names += p + "; ";
      EXPECT_TRUE(left.empty()) << "left on the hosts after the test: " << names;
    }
    cluster_.reset();  // the hosts' mount namespaces, and what was mounted in them, go with it
    std::error_code ignored;
    if (!short_dir_.empty()) std::filesystem::remove_all(short_dir_, ignored);
    if (!dir_.empty()) std::filesystem::remove(dir_ + "/ddx-without-its-libraries", ignored);  // 400 MB
  }

  // Scratch folders live in /tmp/ddx-hs<pid>: a drain reason is cut at 120 characters, and
  // one that names a short path, as a cluster's /scratch, is read whole in `sinfo -R`.
  static constexpr const char* kShortDirPrefix = "/tmp/ddx-hs";

  // Those of test processes that are gone (killed by a CTest timeout).
  static void remove_stale_short_dirs() {
    const std::string prefix = std::string(kShortDirPrefix).substr(5);
    for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      const long pid = std::atol(name.substr(prefix.size()).c_str());
      std::error_code ignored;
      if (pid > 0 && !process_alive(static_cast<pid_t>(pid))) std::filesystem::remove_all(entry.path(), ignored);
    }
  }

  // HealthCheckProgram lines: every node (drained ones too, or none would be resumed) every
  // `interval_s`, so that a test waits seconds, not the shipped 300.
  std::string health_check_config(int interval_s = 2) {
    return "HealthCheckProgram=" + per_host_wrapper("ddx-health-check.sh") + "\nHealthCheckInterval=" +
           std::to_string(interval_s) + "\nHealthCheckNodeState=ANY\n";
  }

  // The shipped lines of examples/slurm/slurm.conf.health that set up the Prolog, with its path
  // replaced by the per-host wrapper (HealthCheckProgram and Epilog left out).
  std::string prolog_config() {
    std::ifstream in(kExamples + "/slurm.conf.health");
    std::string out;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Prolog=", 0) == 0) {
        out += "Prolog=" + per_host_wrapper("prolog.sh") + "\n";
      } else if (line.rfind("PrologFlags=", 0) == 0 || line.rfind("SchedulerParameters=", 0) == 0) {
        out += line + "\n";
      }
    }
    return out;
  }

  // <dir>/<script>-per-host.sh: runs examples/slurm/<script> with this node's configuration and
  // logs its exit code and last line to <dir>/<script>-<node>.log.
  std::string per_host_wrapper(const std::string& script) {
    const std::string path = dir_ + "/" + script + "-per-host.sh";
    write_atomically(path,
                     "#!/bin/bash\n"
                     "# Both test hosts are one machine: each node picks its own configuration.\n"
                     "[[ -e \"" + dir_ + "/stop-" + script + "\" ]] && exit 0\n"
                     "out=$(DDX_HEALTH_CONFIG=\"" + dir_ + "/health-$SLURMD_NODENAME.conf\" \"" + kExamples + "/" + script +
                         "\" 2>&1)\n"
                         "rc=$?\n"
                         "printf '%s\\n' \"$out\" > \"" + dir_ + "/" + script + "-$SLURMD_NODENAME.out\"\n"
                         "printf 'rc=%d job=%s %s\\n' \"$rc\" \"$SLURM_JOB_ID\" \"${out##*$'\\n'}\" >> \"" + dir_ + "/" +
                         script + "-$SLURMD_NODENAME.log\"\n"
                         "exit \"$rc\"\n",
                     0755);
    return path;
  }

  std::string scratch(const std::string& node) const { return short_dir_ + "/scratch-" + node; }

  // `node`'s configuration with `settings` added (shell lines), written atomically: a check
  // that starts while it changes reads the old one or the new one.
  void set_host(const std::string& node, const std::vector<std::string>& settings) {
    host_settings_[node] = settings;
    write_host_config(node);
  }

  void write_host_config(const std::string& node) {
    std::string text =
        "# ddx-health.conf for " + node + " in this test's cluster\n"
        "DDX=" DDX_BIN "\n"
        "DDX_HEALTH_ARGS=\"--path " + scratch(node) + " --storage-mib 4\"\n"
        "DDX_HEALTH_JSON=" + dir_ + "/health-%n.json\n"
        "DDX_HEALTH_TIMEOUT=50\n"
        // This test's own lock files: another test's cluster has nodes of the same names.
        "DDX_HEALTH_LOCK=" + dir_ + "/lock-%n\n"
        // No GPU whatever this machine has, unless a test plants the fake NVML.
        "export DDX_NVML_LIBRARY=" + dir_ + "/no-libnvidia-ml.so.1\n"
        "export SLURM_CONF=" + SlurmCluster::conf_for_this_process() + "\n";
    for (const auto& s : host_settings_[node]) text += s + "\n";
    write_atomically(dir_ + "/health-" + node + ".conf", text);
  }

  std::vector<ScriptRun> runs(const std::string& script, const std::string& node) const {
    std::vector<ScriptRun> out;
    static const std::regex line_re(R"(^rc=(\d+) job=(\S*) (.*)$)");
    for (const auto& line : lines_of(read_file(dir_ + "/" + script + "-" + node + ".log"))) {
      std::smatch m;
      // A check that found the last one still going skipped its turn and did nothing (the
      // scripts' lock; tests/scripts/health_slurm_scripts_test.sh): not a run to judge.
      if (std::regex_match(line, m, line_re) && !has(m[3], "; this one skipped, node left as it is")) {
        out.push_back({std::stoi(m[1]), m[2], m[3]});
      }
    }
    return out;
  }

  std::map<std::string, NodeView> nodes() const {
    std::map<std::string, NodeView> out;
    const RunResult r = cluster_->run({"/usr/bin/sinfo", "-h", "-N", "-o", "%N|%T|%E"}, {}, 30);
    for (const auto& line : lines_of(r.output)) {
      const size_t a = line.find('|'), b = line.find('|', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      out[line.substr(0, a)] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
    }
    return out;
  }

  // `sinfo -R`'s rows as "NODELIST|REASON".
  std::vector<std::string> sinfo_reasons() const {
    return lines_of(cluster_->run({"/usr/bin/sinfo", "-R", "-h", "-o", "%N|%E"}, {}, 30).output);
  }

  // Waits (at most `timeout_s`) until `done` holds; false when it never did.
  static bool wait_until(const std::function<bool()>& done, int timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return done();
  }

  // Waits for `count` more complete runs of `script` on `node` than there are now: the first
  // may have read the configuration before a change, the second did not.
  bool wait_for_runs(const std::string& script, const std::string& node, size_t count, int timeout_s = 120) {
    const size_t now = runs(script, node).size();
    return wait_until([&] { return runs(script, node).size() >= now + count; }, timeout_s);
  }

  // `command` (sh) inside host `host`'s slurmd's mount namespace.
  RunResult in_host_mounts(int host, const std::string& command) const {
    return run_in(dir_, {"/usr/bin/nsenter", "--target", std::to_string(cluster_->slurmd_pid(host)), "--mount", "/bin/sh", "-c", command},
                  {}, 60);
  }

  void expect_idle(const std::string& node) {
    const NodeView view = nodes()[node];
    EXPECT_EQ(view.state, "idle") << node << "\n" << diagnosis();
    EXPECT_EQ(view.reason, "none") << node;
  }

  std::string diagnosis() const {
    std::string out = "--- sinfo -N\n" + cluster_->run({"/usr/bin/sinfo", "-N", "-o", "%N %T %E"}, {}, 30).output;
    for (const char* node : {kHostA, kHostB}) {
      for (const char* script : {"ddx-health-check.sh", "prolog.sh"}) {
        const std::string log = read_file(dir_ + "/" + script + "-" + node + ".log");
        if (log.empty()) continue;
        const auto lines = lines_of(log);
        out += std::string("--- ") + script + " on " + node + " (last runs)\n";
        for (size_t i = lines.size() > 4 ? lines.size() - 4 : 0; i < lines.size(); ++i) out += lines[i] + "\n";
        out += "--- its last output\n" + read_file(dir_ + "/" + script + "-" + node + ".out");
      }
    }
    return out + cluster_->logs();
  }

  std::string dir_, short_dir_;
  std::unique_ptr<SlurmCluster> cluster_;
  std::map<std::string, std::vector<std::string>> host_settings_;
};

}  // namespace
}  // namespace ddx::testing

namespace ddx::testing {
namespace {

// The health check's script on both hosts, planted faults on host b alone.
class HealthCheckProgram : public HealthSlurm {
 protected:
  static constexpr const char* kScript = "ddx-health-check.sh";

  // Up, with both nodes idle and each having finished a check (so both are OK or WARN here).
  void start(int interval_s = 2) {
    start_cluster(health_check_config(interval_s));
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_TRUE(wait_for_runs(kScript, kHostA, 1) && wait_for_runs(kScript, kHostB, 1)) << diagnosis();
    expect_idle(kHostA);
    expect_idle(kHostB);
  }

  // `plant` makes host b faulty, `clear` heals it: host b is drained with exactly `reason`
  // (sinfo -R shows that one row), host a stays idle with every check OK or WARN, and once
  // cleared host b is resumed by the next check (--slurm-resume: the reason is ddx's).
  void drained_then_resumed(const std::function<void()>& plant, const std::string& reason,
                            const std::function<void()>& clear, const std::function<void()>& while_drained = {}) {
    const size_t a_before = runs(kScript, kHostA).size();
    plant();
    ASSERT_TRUE(wait_until([&] { return nodes()[kHostB].state == "drained"; }, 90))
        << "host b was not drained\n" << diagnosis();
    EXPECT_EQ(nodes()[kHostB].reason, reason) << diagnosis();
    EXPECT_EQ(sinfo_reasons(), std::vector<std::string>{std::string(kHostB) + "|" + reason});
    // What an operator types: plain `sinfo -R` (SLURM 22.05 cuts its REASON column at 20
    // characters; docs/health.md gives the wider format).
    const std::string plain = cluster_->run({"/usr/bin/sinfo", "-R"}, {}, 30).output;
    EXPECT_TRUE(has(plain, reason.substr(0, 20)) && has(plain, kHostB)) << plain;
    const std::string wide = cluster_->run({"/usr/bin/sinfo", "-R", "-o", "%120E %9u %19H %N"}, {}, 30).output;
    EXPECT_TRUE(has(wide, reason + " ")) << wide;
    // The run that drained it may still be ending: the next one, finding it drained, is CRITICAL too.
    ASSERT_TRUE(wait_for_runs(kScript, kHostB, 1)) << diagnosis();
    const ScriptRun b_run = runs(kScript, kHostB).back();
    EXPECT_EQ(b_run.rc, 2) << b_run.verdict;  // the script's exit code is ddx's CRITICAL
    EXPECT_EQ(b_run.verdict.rfind("ddx health: CRITICAL on ddx-host-b ", 0), 0u) << b_run.verdict;
    // Host a checked itself since, healthy, and stays in service.
    ASSERT_TRUE(wait_for_runs(kScript, kHostA, 1)) << diagnosis();
    const auto a_runs = runs(kScript, kHostA);
    for (size_t k = a_before; k < a_runs.size(); ++k) {
      EXPECT_TRUE(a_runs[k].rc == 0 || a_runs[k].rc == 1) << a_runs[k].verdict;
    }
    expect_idle(kHostA);
    if (while_drained) while_drained();

    clear();
    ASSERT_TRUE(wait_until([&] { return nodes()[kHostB].state == "idle"; }, 90))
        << "host b was not resumed once healthy\n" << diagnosis();
    EXPECT_EQ(nodes()[kHostB].reason, "none");
    EXPECT_TRUE(sinfo_reasons().empty()) << sinfo_reasons().front();
    expect_idle(kHostA);
  }
};

// (a) Host b's scratch folder (--path) full: a 4 MiB tmpfs over it in host b's mounts, filled.
TEST_F(HealthCheckProgram, AFullScratchDiskDrainsHostBAloneAndItIsResumedOnceFreed) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string b_scratch = scratch(kHostB);
  drained_then_resumed(
      [&] {
        const RunResult r = in_host_mounts(1, "mount -t tmpfs -o size=4m ddx-test-scratch '" + b_scratch + "' && "
                                               "{ dd if=/dev/zero of='" + b_scratch + "/fill' bs=64k 2>/dev/null; df -k '" +
                                               b_scratch + "'; }");
        ASSERT_TRUE(has(r.output, "ddx-test-scratch")) << r.output;
      },
      "ddx: full " + b_scratch,
      [&] {
        const RunResult r = in_host_mounts(1, "umount '" + b_scratch + "'");
        ASSERT_EQ(r.exit_code, 0) << r.output;
      });
}

// (b) An XID 79 (GPU fallen off the bus) in host b's kernel log for a GPU of the fake NVML,
// then an uncorrectable ECC error (the fake NVML's planted faults): each drains host b alone.
TEST_F(HealthCheckProgram, AnXid79OrAnUncorrectableEccErrorDrainsHostBAloneAndItIsResumedOnceCleared) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::vector<std::string> healthy_gpus = {"export DDX_NVML_LIBRARY=" FAKE_NVML, "export FAKE_NVML_SCENARIO=healthy"};
  set_host(kHostB, healthy_gpus);
  ASSERT_TRUE(wait_for_runs(kScript, kHostB, 2)) << diagnosis();  // one that read the new configuration
  expect_idle(kHostB);
  // The fake NVML's GPU 3 is at PCI 00000000:48:00.0; the driver logs it as 0000:48:00. The
  // kernel log is host b's own: a one-record file over /dev/kmsg in its mount namespace.
  const std::string kmsg = short_dir_ + "/kmsg-with-xid79";
  write_atomically(kmsg, "3,812,1734000000,-;NVRM: Xid (PCI:0000:48:00): 79, pid=4242, GPU has fallen off the bus.\n");
  drained_then_resumed(
      [&] {
        const RunResult r = in_host_mounts(1, "mount --bind '" + kmsg + "' /dev/kmsg");
        ASSERT_EQ(r.exit_code, 0) << r.output;
      },
      "ddx: gpu3 XID 79",
      [&] {
        const RunResult r = in_host_mounts(1, "umount /dev/kmsg");
        ASSERT_EQ(r.exit_code, 0) << r.output;
      });
  // The fake NVML's planted faults: GPU 3's 2 uncorrected ECC errors among others on GPUs 0-2.
  drained_then_resumed(
      [&] { set_host(kHostB, {"export DDX_NVML_LIBRARY=" FAKE_NVML, "export FAKE_NVML_SCENARIO=faults"}); },
      "ddx: gpu0 66 retired pages; gpu1 clocks held down; gpu2 PCIe link degraded; gpu2 NVLink down; +1 more",
      [&] { set_host(kHostB, healthy_gpus); },
      [&] {
        // The one the 120-character reason leaves out is in the node's report (DDX_HEALTH_JSON).
        const auto report = nlohmann::json::parse(read_file(dir_ + "/health-ddx-host-b.json"));
        bool ecc = false;
        for (const auto& check : report.at("checks")) {
          if (check.at("name") == "gpu3 ecc") {
            ecc = true;
            EXPECT_EQ(check.at("state"), "CRITICAL") << check.dump();
            EXPECT_EQ(check.at("reason"), "gpu3 uncorrected ECC errors") << check.dump();
          }
        }
        EXPECT_TRUE(ecc) << report.dump(2);
      });
}

// (c) One wrong element in host b's known-answer GEMM (DDX_FAULT=gemm-wrong), found by the
// level-2 check its configuration asks for (DDX_HEALTH_LEVEL=2).
TEST_F(HealthCheckProgram, AWrongGemmElementAtLevel2DrainsHostBAloneAndItIsResumedOnceGone) {
  // slurmd starts a check every interval whether the last one ended or not: the interval
  // must outlast a level-2 run (seconds here, with both hosts on 2 cores), or they pile up.
  ASSERT_NO_FATAL_FAILURE(start(15));
  drained_then_resumed(
      [&] { set_host(kHostB, {"DDX_HEALTH_LEVEL=2", "export DDX_FAULT=gemm-wrong@device=cpu,dtype=fp32,row=300,col=17"}); },
      "ddx: gemm cpu fp32 wrong element", [&] { set_host(kHostB, {"DDX_HEALTH_LEVEL=2"}); });
}

// 2. A node an operator drained stays drained although ddx finds it healthy, and a fault ddx
// finds there leaves the operator's reason as it is; once the operator resumes it, ddx drains
// and resumes it again with its own reason.
TEST_F(HealthCheckProgram, AnOperatorsDrainStaysAlthoughDdxFindsTheNodeHealthy) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string operator_reason = "operator: replacing a DIMM, ticket 4711";
  const RunResult drain = cluster_->run(
      {"/usr/bin/scontrol", "update", "nodename=ddx-host-b", "state=drain", "reason=" + operator_reason}, {}, 30);
  ASSERT_EQ(drain.exit_code, 0) << drain.output;
  ASSERT_TRUE(wait_for_runs(kScript, kHostB, 3)) << diagnosis();
  EXPECT_EQ(nodes()[kHostB].state, "drained") << diagnosis();
  EXPECT_EQ(nodes()[kHostB].reason, operator_reason);
  const ScriptRun healthy = runs(kScript, kHostB).back();
  EXPECT_TRUE(healthy.rc == 0 || healthy.rc == 1) << healthy.verdict;
  EXPECT_TRUE(has(read_file(dir_ + "/ddx-health-check.sh-ddx-host-b.out"),
                  "slurm: ddx-host-b stays IDLE+DRAIN: reason \"" + operator_reason + "\" is not ddx's"))
      << read_file(dir_ + "/ddx-health-check.sh-ddx-host-b.out");

  // A fault now: ddx would drain it, but the operator's reason is kept.
  set_host(kHostB, {"export DDX_NVML_LIBRARY=" FAKE_NVML, "export FAKE_NVML_SCENARIO=faults"});
  ASSERT_TRUE(wait_for_runs(kScript, kHostB, 2)) << diagnosis();
  EXPECT_EQ(runs(kScript, kHostB).back().rc, 2);
  EXPECT_EQ(nodes()[kHostB].reason, operator_reason) << diagnosis();
  EXPECT_EQ(sinfo_reasons(), std::vector<std::string>{std::string(kHostB) + "|" + operator_reason});
  set_host(kHostB, {});
  ASSERT_TRUE(wait_for_runs(kScript, kHostB, 2)) << diagnosis();
  EXPECT_EQ(nodes()[kHostB].state, "drained");
  EXPECT_EQ(nodes()[kHostB].reason, operator_reason);
  expect_idle(kHostA);
}

// 4. A ddx that cannot run its checks: a copy of bin/ddx whose libraries are gone (its RUNPATH
// names a folder without LibTorch), then no binary at all. The script exits 3 (UNKNOWN) and the
// node stays in service, though its configuration also plants a fault a working ddx drains for.
TEST_F(HealthCheckProgram, ADdxThatCannotRunLeavesTheNodeInServiceAndTheScriptExits3) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string broken = dir_ + "/ddx-without-its-libraries";
  std::filesystem::copy_file(DDX_BIN, broken, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::create_directories(dir_ + "/empty-lib");
  const RunResult patched = run_in(dir_, {"/usr/bin/patchelf", "--set-rpath", dir_ + "/empty-lib", broken}, {}, 120);
  ASSERT_EQ(patched.exit_code, 0) << "patchelf (ci/bootstrap.sh installs it): " << patched.output;
  const std::vector<std::string> faulty_gpus = {"export DDX_NVML_LIBRARY=" FAKE_NVML, "export FAKE_NVML_SCENARIO=faults"};
  for (const std::string& ddx : {broken, dir_ + "/no-such-ddx"}) {
    std::vector<std::string> settings = faulty_gpus;
    settings.push_back("DDX=" + ddx);
    set_host(kHostB, settings);
    ASSERT_TRUE(wait_for_runs(kScript, kHostB, 3)) << diagnosis();
    const ScriptRun run = runs(kScript, kHostB).back();
    EXPECT_EQ(run.rc, 3) << run.verdict;
    EXPECT_EQ(run.verdict.rfind("ddx-health: UNKNOWN on ddx-host-b: " + ddx + " could not run (exit 127: ", 0), 0u)
        << run.verdict;
    EXPECT_TRUE(has(run.verdict, "; node left as it is")) << run.verdict;
    expect_idle(kHostB);
  }
  EXPECT_TRUE(has(runs(kScript, kHostB).back().verdict, "No such file or directory")) << runs(kScript, kHostB).back().verdict;
  // The same configuration with a working ddx drains it: what was left alone was a real fault.
  set_host(kHostB, faulty_gpus);
  ASSERT_TRUE(wait_until([&] { return nodes()[kHostB].state == "drained"; }, 90)) << diagnosis();
  expect_idle(kHostA);
}

// 3. As Prolog (the shipped slurm.conf.health lines: PrologFlags=Alloc,
// SchedulerParameters=nohold_on_prolog_fail): a job the scheduler gives to the bad node (host b
// weighted first) fails its Prolog there, which drains host b with ddx's reason, and is
// requeued and runs on host a.
TEST_F(HealthSlurm, APrologOnABadNodeRequeuesTheJobOntoTheHealthyOne) {
  start_cluster(prolog_config());
  if (HasFatalFailure() || IsSkipped()) return;
  // The scheduler takes the lowest weight first: host b, deterministically.
  const RunResult weight = cluster_->run({"/usr/bin/scontrol", "update", "nodename=ddx-host-a", "weight=100"}, {}, 30);
  ASSERT_EQ(weight.exit_code, 0) << weight.output;
  set_host(kHostB, {"export DDX_NVML_LIBRARY=" FAKE_NVML, "export FAKE_NVML_SCENARIO=faults"});

  const RunResult job = cluster_->run({"/usr/bin/sbatch", "--wait", "-N", "1", "-n", "1", "-o", dir_ + "/job-%j.out",
                                       "--wrap", "echo ran on $(hostname)"},
                                      {}, 240);
  ASSERT_EQ(job.exit_code, 0) << job.output << diagnosis();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(job.output, m, std::regex(R"(Submitted batch job (\d+))"))) << job.output;
  const std::string id = m[1];
  EXPECT_EQ(read_file(dir_ + "/job-" + id + ".out"), "ran on ddx-host-a\n");
  const std::string record = cluster_->run({"/usr/bin/scontrol", "show", "job", id, "-o"}, {}, 30).output;
  EXPECT_TRUE(has(record, " JobState=COMPLETED ")) << record;
  EXPECT_TRUE(has(record, " Restarts=1 ")) << record;  // requeued once
  EXPECT_TRUE(has(record, " NodeList=ddx-host-a ")) << record;

  // The Prolog ran on host b for this job and failed it (exit 1 on CRITICAL), then on host a.
  const auto on_b = runs("prolog.sh", kHostB);
  ASSERT_EQ(on_b.size(), 1u) << diagnosis();
  EXPECT_EQ(on_b[0].job, id);
  EXPECT_EQ(on_b[0].rc, 1) << on_b[0].verdict;
  EXPECT_EQ(on_b[0].verdict.rfind("ddx health: CRITICAL on ddx-host-b ", 0), 0u) << on_b[0].verdict;
  const auto on_a = runs("prolog.sh", kHostA);
  ASSERT_EQ(on_a.size(), 1u) << diagnosis();
  EXPECT_EQ(on_a[0].job, id);
  EXPECT_EQ(on_a[0].rc, 0) << on_a[0].verdict;
  const std::string reason = "ddx: gpu0 66 retired pages; gpu1 clocks held down; gpu2 PCIe link degraded; gpu2 NVLink down; +1 more";
  EXPECT_EQ(nodes()[kHostB].state, "drained") << diagnosis();
  EXPECT_EQ(sinfo_reasons(), std::vector<std::string>{std::string(kHostB) + "|" + reason}) << diagnosis();
  expect_idle(kHostA);
}

}  // namespace
}  // namespace ddx::testing
