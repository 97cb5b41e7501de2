#pragma once
// Two simulated hosts for multi-node tests: two network namespaces joined by a veth pair, each
// end named `ddx0` with a private address that exists only inside its namespace, and each
// command run in its own UTS namespace with the host's own hostname (which resolves nowhere:
// no /etc/hosts entry, and the DNS server is unreachable from inside). Needs root; where the
// kernel or the sandbox refuses namespaces, `refused()` says why and the test skips.
//
// Teardown is unconditional: the destructor kills every process left in either namespace
// (`ip netns pids`) and deletes both (which deletes the veth pair). A test process killed by
// its CTest timeout cannot run its destructor, so the constructor first removes namespaces of
// earlier test processes that are no longer alive (names carry the creator's pid).
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "process_helpers.h"

namespace ddx::testing {

class SimulatedHosts {
 public:
  static constexpr const char* kIp = "/usr/sbin/ip";
  static constexpr const char* kInterface = "ddx0";
  static constexpr const char* kPrefix = "ddxh";

  SimulatedHosts() {
    remove_stale();
    const std::string tag = kPrefix + std::to_string(::getpid());
    for (int h = 0; h < 2; ++h) ns_[h] = tag + (h == 0 ? "a" : "b");
    // Each step's output is kept: the first failure is the reason a test skips.
    const std::vector<std::string> steps = {
        "netns add " + ns_[0],
        "netns add " + ns_[1],
        "link add " + ns_[0] + " type veth peer name " + ns_[1],
        "link set " + ns_[0] + " netns " + ns_[0],
        "link set " + ns_[1] + " netns " + ns_[1],
    };
    for (const auto& step : steps) {
      if (!ip(step)) return;
    }
    for (int h = 0; h < 2; ++h) {
      const std::string in = "-n " + ns_[h] + " ";
      for (const auto& step : {in + "link set " + ns_[h] + " name " + kInterface,
                               in + "addr add " + address(h) + "/24 dev " + kInterface,
                               in + "link set " + kInterface + " up", in + "link set lo up"}) {
        if (!ip(step)) return;
      }
    }
  }

  ~SimulatedHosts() {
    for (const auto& ns : ns_) {
      if (!ns.empty()) remove(ns);
    }
    if (!ns_[0].empty()) {  // pairs never moved in
      capture(std::string(kIp) + " link del " + ns_[0]);
      capture(std::string(kIp) + " link del " + ns_[0] + "x");
    }
  }

  // The namespaces' names (tests check that they are gone after teardown).
  const std::array<std::string, 2>& namespaces() const { return ns_; }

  SimulatedHosts(const SimulatedHosts&) = delete;
  SimulatedHosts& operator=(const SimulatedHosts&) = delete;

  // A second link between the hosts, named `name` on both, whose ends sit in different subnets
  // (address/24 each): an interface the other host has no route to, like a management network
  // the job must not use. False (with refused() saying why) when the kernel refuses it.
  bool add_unroutable_link(const std::string& name, const std::string& address_a, const std::string& address_b) {
    const std::string a = ns_[0] + "x", b = ns_[1] + "x";
    if (!ip("link add " + a + " type veth peer name " + b)) return false;
    const std::string ends[2] = {a, b}, addresses[2] = {address_a, address_b};
    for (int h = 0; h < 2; ++h) {
      const std::string in = "-n " + ns_[h] + " ";
      if (!ip("link set " + ends[h] + " netns " + ns_[h]) || !ip(in + "link set " + ends[h] + " name " + name) ||
          !ip(in + "addr add " + addresses[h] + "/24 dev " + name) || !ip(in + "link set " + name + " up")) {
        return false;
      }
    }
    return true;
  }

  // Empty when both hosts are up; else the step that failed and its message.
  const std::string& refused() const { return refused_; }

  std::string address(int host) const { return host == 0 ? "10.213.0.1" : "10.213.0.2"; }
  std::string hostname(int host) const { return host == 0 ? "ddx-host-a" : "ddx-host-b"; }

  // From now on, commands on either host resolve both hostnames (and only those), as on a
  // cluster with DNS: `hosts_file` is written and bind-mounted over /etc/hosts in a private
  // mount namespace of each command. By default the names resolve nowhere.
  void resolve_hostnames(const std::string& hosts_file) {
    std::ofstream out(hosts_file);
    out << "127.0.0.1 localhost\n" << address(0) << " " << hostname(0) << "\n" << address(1) << " " << hostname(1) << "\n";
    hosts_file_ = hosts_file;
  }

  // `argv` run on `host`: inside its network namespace, under its own hostname. nsenter, not
  // `ip netns exec`, which remounts /sys and so hides the cgroup tree slurmd needs. Every
  // wrapper execs the next, so the child's pid and process group are the command's own.
  std::vector<std::string> on_host(int host, const std::vector<std::string>& argv) const {
    std::vector<std::string> wrapped = {"/usr/bin/nsenter", "--net=/run/netns/" + ns_[host], "/usr/bin/unshare", "--uts"};
    std::string script = "hostname \"$0\" && exec \"$@\"";
    if (!hosts_file_.empty()) {
      wrapped.push_back("--mount");
      script = "mount --bind '" + hosts_file_ + "' /etc/hosts && " + script;
    }
    for (const std::string& part : {std::string("/bin/sh"), std::string("-c"), script, hostname(host)}) {
      wrapped.push_back(part);
    }
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return wrapped;
  }

  // Runs `argv_for(h)` on both hosts at once (each output in <dir>/<hostname>.txt) and waits
  // up to `timeout_s` for both; a host still running then is killed and gets exit code -1.
  template <typename ArgvFor>
  std::array<RunResult, 2> run_on_both(const std::string& dir, ArgvFor argv_for,
                                       const std::map<std::string, std::string>& env, int timeout_s,
                                       const std::vector<std::string>& env_removals = {}) const {
    std::vector<std::unique_ptr<ChildProcess>> children;
    for (int h = 0; h < 2; ++h) {
      children.push_back(std::make_unique<ChildProcess>(on_host(h, argv_for(h)), env,
                                                        dir + "/" + hostname(h) + ".txt", env_removals));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    std::array<RunResult, 2> results;
    for (int h = 0; h < 2; ++h) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      auto status = children[h]->wait(std::max(left, std::chrono::milliseconds(1)));
      results[h].output = children[h]->output();
      if (!status) {
        results[h].output += "\n[test] TIMED OUT after " + std::to_string(timeout_s) + " s";
      } else if (WIFEXITED(*status)) {
        results[h].exit_code = WEXITSTATUS(*status);
      }
    }
    return results;
  }

  // `host`'s link taken down: packets to and from it vanish (no reset, no refusal), as when a
  // node drops off the network or loses power.
  bool unplug(int host) { return ip("-n " + ns_[host] + " link set " + kInterface + " down"); }

  // Every process inside `host`'s namespace SIGKILLed (a host that died), the namespace kept.
  void kill_all(int host) const {
    const auto pids = pids_in(ns_[host]);
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    wait_until_dead(pids, std::chrono::seconds(5));
  }

  // Processes still alive in either namespace (a finished run must leave none).
  std::vector<pid_t> processes_left() const {
    std::vector<pid_t> pids;
    for (const auto& ns : ns_) {
      for (pid_t pid : pids_in(ns)) {
        if (process_alive(pid)) pids.push_back(pid);
      }
    }
    return pids;
  }

 private:
  static std::string capture(const std::string& command) {
    std::string out;
    if (FILE* p = ::popen((command + " 2>&1").c_str(), "r")) {
      std::array<char, 512> buf{};
      while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
      if (::pclose(p) != 0) out = "!" + out;  // marks a failed command
    }
    return out;
  }

  bool ip(const std::string& args) {
    const std::string out = capture(std::string(kIp) + " " + args);
    if (out.empty() || out[0] != '!') return true;
    std::string message = out.substr(1);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    refused_ = "namespaces refused here: `ip " + args + "`: " + message;
    return false;
  }

  static std::vector<pid_t> pids_in(const std::string& ns) {
    std::vector<pid_t> pids;
    std::istringstream in(capture(std::string(kIp) + " netns pids " + ns));
    for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
    return pids;
  }

  static void remove(const std::string& ns) {
    for (int round = 0; round < 3; ++round) {
      const auto pids = pids_in(ns);
      if (pids.empty()) break;
      for (pid_t pid : pids) ::kill(pid, SIGKILL);
      wait_until_dead(pids, std::chrono::seconds(5));
    }
    capture(std::string(kIp) + " netns del " + ns);
  }

  // Namespaces named kPrefix<pid>{a,b} whose creating test process is gone.
  static void remove_stale() {
    std::istringstream names(capture(std::string(kIp) + " netns list"));
    for (std::string line; std::getline(names, line);) {
      const std::string name = line.substr(0, line.find(' '));
      if (name.rfind(kPrefix, 0) != 0 || name.size() < 6) continue;
      const long pid = std::atol(name.substr(4, name.size() - 5).c_str());
      if (pid > 0 && !process_alive(static_cast<pid_t>(pid))) remove(name);
    }
  }

  std::array<std::string, 2> ns_;
  std::string refused_;
  std::string hosts_file_;
};

}  // namespace ddx::testing
