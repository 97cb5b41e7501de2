#include "launcher/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "ddx/errors/error_report.h"

namespace ddx::launcher {
namespace {

// argv/envp for execve, built before fork(): the child may only make async-signal-safe calls.
struct ExecArgs {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<char*> envp;

  ExecArgs(const std::vector<std::string>& command, const EnvMap& env) {
    storage.reserve(command.size() + env.size());
    for (const auto& arg : command) storage.push_back(arg);
    for (const auto& [key, value] : env) storage.push_back(key + "=" + value);
    for (size_t i = 0; i < command.size(); ++i) argv.push_back(storage[i].data());
    argv.push_back(nullptr);
    for (size_t i = command.size(); i < storage.size(); ++i) envp.push_back(storage[i].data());
    envp.push_back(nullptr);
  }
};

void write_text(int fd, const char* text) {
  ssize_t unused = ::write(fd, text, std::strlen(text));
  (void)unused;
}

// Runs in the forked child. Only async-signal-safe calls until execve.
[[noreturn]] void exec_worker(const ExecArgs& args, pid_t pgid, pid_t launcher_pid, int stdin_fd,
                              int stdout_fd, int stderr_fd, int inherit_fd) {
  ::setpgid(0, pgid);
  // Dies with the launcher, even when the launcher is SIGKILLed and cannot clean up.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher_pid) ::_exit(127);  // the launcher died before prctl took effect
  ::dup2(stdin_fd, STDIN_FILENO);
  ::dup2(stdout_fd, STDOUT_FILENO);
  ::dup2(stderr_fd, STDERR_FILENO);
  if (inherit_fd >= 0) ::fcntl(inherit_fd, F_SETFD, 0);  // the store's listening socket, for rank 0
  // The launcher blocks the signals it waits for and may ignore some; a worker starts clean.
  for (int signo = 1; signo < NSIG; ++signo) {
    if (signo == SIGKILL || signo == SIGSTOP) continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(signo, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(args.argv[0], args.argv.data(), args.envp.data());
  write_text(STDERR_FILENO, "ddx launch: cannot execute ");
  write_text(STDERR_FILENO, args.argv[0]);
  write_text(STDERR_FILENO, ": ");
  write_text(STDERR_FILENO, std::strerror(errno));
  write_text(STDERR_FILENO, "\n");
  ::_exit(127);
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("ddx launch: pipe: ") + std::strerror(errno));
  }
}

}  // namespace

bool WorkerProcess::failed() const {
  return exited && !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
}

WorkerGroup WorkerGroup::spawn(const LaunchOptions& options, const EnvMap& launcher_env,
                               int restart_count, const std::string& attempt_dir, bool with_logs) {
  WorkerGroup group;
  int stdin_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (stdin_fd < 0) throw std::runtime_error("ddx launch: cannot open /dev/null");
  pid_t launcher_pid = ::getpid();

  for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
    WorkerProcess worker;
    worker.slot.local_rank = local_rank;
    worker.slot.rank = options.node_rank * options.nproc_per_node + local_rank;
    worker.slot.restart_count = restart_count;
    std::string rank_dir = attempt_dir + "/rank_" + std::to_string(worker.slot.rank);
    std::filesystem::create_directories(rank_dir);
    worker.slot.error_file = rank_dir + "/error.json";
    // A reused --log-dir holds the error file of an earlier run's rank in this same folder, and
    // this attempt's verdict and failure table must come from this attempt's workers only (its
    // stdout and stderr logs are started afresh too).
    std::error_code stale;
    std::filesystem::remove(worker.slot.error_file, stale);
    if (with_logs) worker.log_dir = rank_dir;

    ExecArgs args(options.command, worker_env(launcher_env, options, worker.slot));
    int out_pipe[2], err_pipe[2];
    make_pipe(out_pipe);
    make_pipe(err_pipe);

    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("ddx launch: fork: ") + std::strerror(errno));
    if (pid == 0) {
      exec_worker(args, group.pgid_ > 0 ? group.pgid_ : 0, launcher_pid, stdin_fd, out_pipe[1],
                  err_pipe[1], worker.slot.rank == 0 ? options.store_listen_fd : -1);
    }
    // Also from the parent: whichever of the two runs first, the group exists before any kill.
    if (group.pgid_ < 0) group.pgid_ = pid;
    ::setpgid(pid, group.pgid_);
    ::close(out_pipe[1]);  // the worker holds the write ends; EOF arrives when it is gone
    ::close(err_pipe[1]);
    worker.pid = pid;
    worker.stdout_fd = out_pipe[0];
    worker.stderr_fd = err_pipe[0];
    group.workers_.push_back(std::move(worker));
  }
  ::close(stdin_fd);
  return group;
}

void WorkerGroup::signal_all(int signo) const {
  if (pgid_ > 0) ::kill(-pgid_, signo);
  // A worker that has not reached setpgid yet is not in the group: signal it directly too.
  for (const auto& w : workers_) {
    if (!w.exited) ::kill(w.pid, signo);
  }
}

WorkerProcess* WorkerGroup::record_exit(pid_t pid, int wait_status) {
  for (auto& w : workers_) {
    if (w.pid == pid && !w.exited) {
      w.exited = true;
      w.wait_status = wait_status;
      w.exit_time = std::chrono::steady_clock::now();
      return &w;
    }
  }
  return nullptr;
}

bool WorkerGroup::all_exited() const {
  for (const auto& w : workers_) {
    if (!w.exited) return false;
  }
  return true;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int signo = WTERMSIG(wait_status);
    return signal_name(signo) + " (signal " + std::to_string(signo) + ")";
  }
  return "unknown status " + std::to_string(wait_status);
}

std::string short_wait_status(int wait_status) {
  if (WIFSIGNALED(wait_status)) return signal_name(WTERMSIG(wait_status));
  return describe_wait_status(wait_status);
}

}  // namespace ddx::launcher
