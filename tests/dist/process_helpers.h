#pragma once
// Starting, waiting for and cleaning up real processes in tests. Every child runs in its own
// process group with its output in a file; the destructor kills the group, so a failing
// assertion never leaves processes behind.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ddx/processes/processes.h"

extern char** environ;

namespace ddx::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

using ddx::process_alive;

// True once every pid is gone, false when some is still alive after `timeout`.
inline bool wait_until_dead(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool any_alive = false;
    for (pid_t pid : pids) any_alive = any_alive || process_alive(pid);
    if (!any_alive) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Processes other than this one, alive, whose command line mentions `needle` (a run's unique
// scratch folder) or that belong to process group `group` (-1: none): what a finished run
// left behind.
inline std::vector<pid_t> processes_left(const std::string& needle, pid_t group = -1) {
  return ddx::live_processes(needle, group);
}

// The child's environment is this process's, without any DDX_* variable (injected faults and
// test switches in DDX_FAULT, timeouts, trace folders): one such variable leaked into
// the test run would otherwise reach every worker of every test. A test that wants one passes
// it in `env_overrides`.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::map<std::string, std::string> env_overrides,
               std::string output_path, std::vector<std::string> env_removals = {})
      : output_path_(std::move(output_path)) {
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      size_t eq = entry.find('=');
      if (eq != std::string::npos && entry.rfind("DDX_", 0) != 0) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    for (const auto& key : env_removals) env.erase(key);
    for (const auto& [k, v] : env_overrides) env[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> c_argv, c_env;
    for (auto& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    for (auto& e : env_strings) c_env.push_back(e.data());
    c_env.push_back(nullptr);
    int out = ::open(output_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      ::execve(c_argv[0], c_argv.data(), c_env.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    ::close(out);
  }

  ~ChildProcess() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }

  // The waitpid() status, or nullopt when it did not exit within `timeout` (then it is killed).
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        reaped_ = true;
        return status;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string output() const { return read_file(output_path_); }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string output_path_;
};

// A command's exit code (-1 when it was killed or timed out) and merged output.
struct RunResult {
  int exit_code = -1;
  std::string output;
};

// Empty when this process may create a mount namespace, else why not. Why tests skip on it:
// reproducing a small /dev/shm needs a private mount namespace (root, or a sandbox that allows
// unshare(CLONE_NEWNS)), which an unprivileged machine cannot give. CI and the dev machines are
// root and allow it, so these tests run there.
inline std::string mount_namespace_refused() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(::unshare(CLONE_NEWNS) == 0 ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "" : "unshare(CLONE_NEWNS) refused here";
}

// Tests that need root's namespaces skip where they are refused, so that an unprivileged
// developer can run the suite. CI runs as root, and there a skip would hide a test that never
// ran behind a green run: ci/test.sh sets DDX_REQUIRE_PRIVILEGED_TESTS=1 as root, and then a
// refusal fails the test instead.
// Any value but unset, 0 or 1 is a mistake (a typo must not turn the requirement off).
inline bool privileged_tests_required() {
  const char* v = std::getenv("DDX_REQUIRE_PRIVILEGED_TESTS");
  if (!v || std::string(v).empty() || std::string(v) == "0") return false;
  if (std::string(v) != "1")
    throw std::invalid_argument("DDX_REQUIRE_PRIVILEGED_TESTS='" + std::string(v) + "': expected 0 or 1");
  return true;
}

}  // namespace ddx::testing

// Skips the test (fails it under DDX_REQUIRE_PRIVILEGED_TESTS=1) when `refused` (an expression
// giving why, "" when allowed) is not empty. The skip is for unprivileged developers only: CI
// (root) sets the variable, so a refusal there is a failure (why: privileged_tests_required).
#define DDX_SKIP_IF_REFUSED(refused)                                                                     \
  do {                                                                                                   \
    if (const std::string ddx_why = (refused); !ddx_why.empty()) {                                        \
      if (::ddx::testing::privileged_tests_required())                                                   \
        GTEST_FAIL() << "refused although DDX_REQUIRE_PRIVILEGED_TESTS=1 (CI runs as root): " << ddx_why; \
      GTEST_SKIP() << ddx_why;                                                                           \
    }                                                                                                    \
  } while (0)

namespace ddx::testing {

// A fresh, empty folder under the build tree: <build>/test-scratch/<prefix>-<tag>-<pid>.
inline std::string scratch_dir(const std::string& prefix, const std::string& tag) {
  std::string dir = std::string(DDX_BINARY_DIR) + "/test-scratch/" + prefix + "-" + tag + "-" + std::to_string(::getpid());
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot create " + dir);
  return dir;
}

// Waits for `child` to end (killing its process group after `timeout_s`): its exit code and output.
inline RunResult result_of(ChildProcess& child, int timeout_s) {
  auto status = child.wait(std::chrono::seconds(timeout_s));
  RunResult r;
  r.output = child.output();
  if (!status) {
    r.output += "\n[test] TIMED OUT after " + std::to_string(timeout_s) + " s";
  } else if (WIFEXITED(*status)) {
    r.exit_code = WEXITSTATUS(*status);
  }
  return r;
}

// Runs `argv` to completion (killing its process group after `timeout_s`), output in `dir`.
inline RunResult run_in(const std::string& dir, std::vector<std::string> argv,
                        std::map<std::string, std::string> env = {}, int timeout_s = 120) {
  ChildProcess child(std::move(argv), std::move(env), dir + "/output.txt");
  return result_of(child, timeout_s);
}

// A port P on loopback with P + 1 ... P + count - 1 free as well, for launchers started with
// --master-port by a test (several nodes, which cannot pick their own): each --max-restarts
// attempt, and each store a fault matrix starts, takes the next port.
inline int free_ports_in_a_row(int count) {
  // Binds `port` (0: any) on loopback; returns the port bound, or -1; the socket stays in *fd.
  auto bind_port = [](int port, int* fd) {
    *fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    socklen_t len = sizeof addr;
    if (*fd < 0 || ::bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return -1;
    }
    return static_cast<int>(ntohs(addr.sin_port));
  };
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::vector<int> fds(static_cast<size_t>(count), -1);
    const int port = bind_port(0, &fds[0]);
    bool all_free = port > 0 && port <= 65536 - count;
    for (int k = 1; all_free && k < count; ++k) all_free = bind_port(port + k, &fds[static_cast<size_t>(k)]) == port + k;
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
    if (all_free) return port;
  }
  throw std::runtime_error("no " + std::to_string(count) + " free ports in a row on loopback");
}

}  // namespace ddx::testing
