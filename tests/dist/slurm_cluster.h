#pragma once
// A private two-node SLURM cluster for tests: a munged, a slurmctld, and one slurmd on each of
// the two simulated hosts (simulated_hosts.h: own network and UTS namespace, hostnames
// ddx-host-a and ddx-host-b, which resolve as on a cluster with DNS). Host a is also the login
// node: srun, sbatch and sinfo run there, as a user would type them.
//
// Everything is private to the test: the daemons listen inside the hosts' namespaces (so the
// fixed ports cannot collide with another test's cluster), and state, spool, logs, the munge
// key and socket live in /tmp/ddx-slurm-<pid> (short: Unix socket paths are limited to 107
// bytes, and slurmd makes one per step there). Nothing of the machine's own SLURM or munge is
// used or touched.
//
// Teardown cannot leave anything: the daemons run in the foreground as children of the test,
// killed with their process groups, and the hosts' teardown kills every process still inside
// either namespace (steps, tasks, slurmstepd). A test process killed by its CTest timeout is
// cleaned up after by the next fixture (stale namespaces and folders carry the dead pid).
#include <dirent.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "process_helpers.h"
#include "simulated_hosts.h"

namespace ddx::testing {

// How soon SLURM itself acts on a node that stops answering, in seconds (slurm.conf's
// SlurmdTimeout, MessageTimeout, KillWait). Short by default, so that a test that loses a node
// gets it back within seconds; a test that judges how ddx alone ends a job raises them far above
// ddx's own timeouts, so that SLURM's kill cannot end the job first and hide a ddx hang.
struct SlurmTimeouts {
  int slurmd = 5;     // SlurmdTimeout: a silent node is set DOWN (its steps cancelled) after this
  int message = 5;    // MessageTimeout: one RPC's wait for its reply
  int kill_wait = 5;  // KillWait: SIGTERM to SIGKILL of a cancelled step's tasks
};

class SlurmCluster {
 public:
  static constexpr int kCtldPort = 6817, kSlurmdPort = 6818;

  // `dir`: the test's scratch folder (daemon output lands in <dir>/slurm-*.txt). `extra_config`:
  // slurm.conf lines a test adds (HealthCheckProgram, Prolog, ...), appended as given.
  explicit SlurmCluster(std::string dir, SlurmTimeouts timeouts = {}, std::string extra_config = {})
      : dir_(std::move(dir)), timeouts_(timeouts), extra_config_(std::move(extra_config)) {
    if (!hosts_->refused().empty()) {
      refused_ = hosts_->refused();
      return;
    }
    for (const char* tool : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun",
                             "/usr/bin/sbatch", "/usr/bin/sinfo", "/usr/bin/scontrol"}) {
      if (::access(tool, X_OK) != 0) {
        refused_ = std::string("SLURM is not installed (no ") + tool +
                   "); ci/bootstrap.sh installs slurmctld, slurmd, slurm-client and munge";
        return;
      }
    }
    remove_stale_state();
    state_ = state_dir_for_this_process();
    std::filesystem::remove_all(state_);
    for (const char* sub : {"", "/state", "/spool", "/spool/ddx-host-a", "/spool/ddx-host-b", "/log", "/munge"}) {
      std::filesystem::create_directories(state_ + sub);
    }
    ::chmod((state_ + "/munge").c_str(), 0711);  // munged wants its socket folder searchable by all
    write_munge_key(state_ + "/munge/munge.key");
    write_config();
    hosts_->resolve_hostnames(state_ + "/hosts");

    const std::string m = state_ + "/munge/";
    start_daemon(0, "munged",
                 {"/usr/sbin/munged", "-F", "--key-file", m + "munge.key", "--socket", m + "munge.sock",
                  "--pid-file", m + "munged.pid", "--log-file", m + "munged.log", "--seed-file", m + "seed"});
    if (!wait_for_file(m + "munge.sock", std::chrono::seconds(10))) {
      failed_ = "munged did not create its socket:\n" + logs();
      return;
    }
    start_daemon(0, "slurmctld", {"/usr/sbin/slurmctld", "-D", "-c", "-i"});
    for (int h = 0; h < 2; ++h) start_daemon(h, "slurmd-" + hosts_->hostname(h), {"/usr/sbin/slurmd", "-D", "-N", hosts_->hostname(h)});
    // Up when both nodes are idle: each slurmd has registered and can take a step.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(45);
    while (std::chrono::steady_clock::now() < deadline) {
      RunResult r = run({"/usr/bin/sinfo", "-h", "-o", "%T %D"}, {}, 10);
      if (r.exit_code == 0 && r.output.find("idle 2") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    failed_ = "the cluster did not come up within 45 s (sinfo never showed both nodes idle):\n" + logs();
  }

  ~SlurmCluster() {
    daemons_.clear();  // kills each daemon's process group
    hosts_.reset();    // kills whatever is left in the namespaces (steps, tasks) and deletes them
    std::error_code ignored;
    if (!state_.empty()) std::filesystem::remove_all(state_, ignored);
  }

  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // Not empty where this machine cannot host a cluster (no namespaces, SLURM not installed):
  // the test skips (fails under DDX_REQUIRE_PRIVILEGED_TESTS=1).
  const std::string& refused() const { return refused_; }
  // Not empty when it could have come up and did not: the daemons' logs say why.
  const std::string& failed() const { return failed_; }

  SimulatedHosts& hosts() { return *hosts_; }

  // Host `host` lost whole, as a node that crashes or drops off the network: its slurmd, the
  // steps' slurmstepd and every task on it are SIGKILLed at once.
  // Its link goes down first, so the other host sees silence, not closed connections.
  void lose_node(int host) {
    hosts_->unplug(host);
    hosts_->kill_all(host);
  }

  const std::string& conf() const { return conf_; }

  // Where this process's cluster keeps its state and its slurm.conf, known before it starts: the
  // scripts slurmd runs from its first moment (a HealthCheckProgram) get no SLURM_CONF, and a
  // test writes it into their configuration first.
  static std::string state_dir_for_this_process() { return "/tmp/ddx-slurm-" + std::to_string(::getpid()); }
  static std::string conf_for_this_process() { return state_dir_for_this_process() + "/slurm.conf"; }

  // The pid of host `host`'s slurmd (each wrapper execs the next, so it is the daemon's own):
  // a test enters its mount namespace, which every script slurmd runs shares, to change what
  // that host alone sees (a full scratch disk, a kernel log).
  pid_t slurmd_pid(int host) const {
    for (size_t d = 0; d < names_.size(); ++d) {
      if (names_[d].first == "slurmd-" + hosts_->hostname(host)) return daemons_[d]->pid();
    }
    return -1;
  }

  // `argv` on the login node (host a) with this cluster's SLURM_CONF, to completion.
  RunResult run(const std::vector<std::string>& argv, std::map<std::string, std::string> env = {},
                int timeout_s = 180) const {
    env["SLURM_CONF"] = conf_;
    const std::string log = dir_ + "/run-" + std::to_string(++runs_) + ".txt";
    ChildProcess child(hosts_->on_host(0, argv), env, log, {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"});
    return result_of(child, timeout_s);
  }

  // The same, started and left running (a test that acts on the job while it runs).
  std::unique_ptr<ChildProcess> start(const std::vector<std::string>& argv, std::map<std::string, std::string> env,
                                      const std::string& output_path) const {
    env["SLURM_CONF"] = conf_;
    return std::make_unique<ChildProcess>(hosts_->on_host(0, argv), env, output_path,
                                          std::vector<std::string>{"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"});
  }

  // Processes on either host other than the cluster's daemons (tasks, steps' slurmstepd), once
  // `patience` has passed without them all exiting: what a finished job left behind.
  std::vector<std::string> tasks_left(std::chrono::milliseconds patience = std::chrono::seconds(10)) const {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
      std::vector<std::string> left;
      for (pid_t pid : hosts_->processes_left()) {
        const std::string comm = trimmed(read_file("/proc/" + std::to_string(pid) + "/comm"));
        if (comm == "munged" || comm == "slurmctld" || comm == "slurmd" || comm == "slurmscriptd" || comm.empty()) continue;
        left.push_back(std::to_string(pid) + " " + comm);
      }
      if (left.empty() || std::chrono::steady_clock::now() > deadline) return left;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  // The daemons' logs, for a failure message.
  std::string logs() const {
    std::string out;
    for (const auto& name : {"slurmctld.log", "slurmd-ddx-host-a.log", "slurmd-ddx-host-b.log"}) {
      std::string text = read_file(state_ + "/log/" + name);
      if (text.size() > 3000) text = "..." + text.substr(text.size() - 3000);
      out += std::string("--- ") + name + "\n" + text;
    }
    for (const auto& [name, daemon] : names_) out += "--- " + name + " (console)\n" + read_file(daemon);
    return out;
  }

 private:
  static std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  static bool wait_for_file(const std::string& path, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (::access(path.c_str(), F_OK) != 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }

  // /tmp/ddx-slurm-<pid> of test processes that are gone (killed by a CTest timeout).
  static void remove_stale_state() {
    for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ddx-slurm-", 0) != 0) continue;
      const long pid = std::atol(name.substr(10).c_str());
      if (pid > 0 && !process_alive(static_cast<pid_t>(pid))) {
        std::error_code ignored;
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
  }

  static void write_munge_key(const std::string& path) {
    std::random_device random;
    std::string key(1024, '\0');
    for (char& c : key) c = static_cast<char>(random());
    {
      std::ofstream out(path, std::ios::binary);
      out << key;
    }
    ::chmod(path.c_str(), 0400);
  }

  // One partition over both hosts, each with this machine's CPUs, oversubscribed as a test
  // machine must be; no cgroups, accounting or job completion plugins to set up.
  void write_config() {
    conf_ = conf_for_this_process();
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    std::ofstream out(conf_);
    out << "ClusterName=ddxtest\n"
        << "SlurmctldHost=" << hosts_->hostname(0) << "(" << hosts_->address(0) << ")\n"
        << "SlurmctldPort=" << kCtldPort << "\nSlurmdPort=" << kSlurmdPort << "\n"
        << "SlurmUser=root\nSlurmdUser=root\n"
        // cred_expire is also how long a requeued job waits before it may start again (120 s
        // by default): 10 s keeps the requeue test short.
        << "AuthType=auth/munge\nCryptoType=crypto/munge\nAuthInfo=socket=" << state_
        << "/munge/munge.sock,cred_expire=10\n"
        << "StateSaveLocation=" << state_ << "/state\n"
        << "SlurmdSpoolDir=" << state_ << "/spool/%n\n"
        << "SlurmctldPidFile=" << state_ << "/slurmctld.pid\nSlurmdPidFile=" << state_ << "/slurmd-%n.pid\n"
        << "SlurmctldLogFile=" << state_ << "/log/slurmctld.log\nSlurmdLogFile=" << state_ << "/log/slurmd-%n.log\n"
        << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
        << "MpiDefault=none\nReturnToService=2\nSchedulerType=sched/builtin\n"
        << "JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n"
        // By default a lost node is noticed within seconds, not SLURM's default 5 minutes.
        << "SlurmdTimeout=" << timeouts_.slurmd << "\nMessageTimeout=" << timeouts_.message
        << "\nKillWait=" << timeouts_.kill_wait << "\n";
    for (int h = 0; h < 2; ++h) {
      out << "NodeName=" << hosts_->hostname(h) << " NodeAddr=" << hosts_->address(h) << " CPUs=" << cpus
          << " State=UNKNOWN\n";
    }
    out << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n"
        << extra_config_;
  }

  void start_daemon(int host, const std::string& name, const std::vector<std::string>& argv) {
    const std::string console = dir_ + "/slurm-" + name + ".txt";
    daemons_.push_back(std::make_unique<ChildProcess>(hosts_->on_host(host, argv),
                                                      std::map<std::string, std::string>{{"SLURM_CONF", conf_}},
                                                      console));
    names_.emplace_back(name, console);
  }

  std::string dir_, state_, conf_;
  SlurmTimeouts timeouts_;
  std::string extra_config_;
  std::unique_ptr<SimulatedHosts> hosts_ = std::make_unique<SimulatedHosts>();
  std::string refused_, failed_;
  std::vector<std::unique_ptr<ChildProcess>> daemons_;
  std::vector<std::pair<std::string, std::string>> names_;
  mutable int runs_ = 0;
};

}  // namespace ddx::testing
