#include "ddx/processes/run_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "ddx/processes/processes.h"

namespace ddx {

ProcessOutcome run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const std::string& log_path, double timeout_s) {
  const int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) throw std::runtime_error("cannot create " + log_path + ": " + std::strerror(errno));
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());  // a bare name (a --launcher of "srun", "mpiexec") is looked up on PATH
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out);
  ProcessOutcome outcome;
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      outcome.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!outcome.timed_out) outcome.left_in_group = static_cast<int>(live_processes("", pid).size());
  ::kill(-pid, SIGKILL);  // nothing of the run outlives it
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!outcome.timed_out && WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  return outcome;
}

std::string self_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw std::runtime_error("cannot find the ddx executable (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

std::string tail_lines(const std::string& path, int n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "    " + l + "\n";
  return out;
}

}  // namespace ddx
