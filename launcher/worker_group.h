#pragma once
// One attempt's worker processes: forked and exec'd together into their own process group, so
// one kill() reaches every worker and whatever they spawned without leaving it.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ddx/processes/env.h"
#include "launcher/launch_options.h"
#include "launcher/worker_env.h"

namespace ddx::launcher {

struct WorkerProcess {
  WorkerSlot slot;
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends of the worker's pipes, owned by the output pump once started
  int stderr_fd = -1;
  std::string log_dir;  // <log-dir>/attempt_<k>/rank_<N>, empty without --log-dir
  bool exited = false;
  int wait_status = 0;  // as from waitpid()
  std::chrono::steady_clock::time_point exit_time;

  bool failed() const;  // exited with a non-zero code or a signal
};

class WorkerGroup {
 public:
  // Forks and execs every local worker of attempt `restart_count`. Must run on the main thread
  // (PR_SET_PDEATHSIG fires when the *thread* that forked exits) with no other threads alive.
  // `attempt_dir` holds per-rank error files (and logs when `with_logs`).
  static WorkerGroup spawn(const LaunchOptions& options, const EnvMap& launcher_env,
                           int restart_count, const std::string& attempt_dir, bool with_logs);

  std::vector<WorkerProcess>& workers() { return workers_; }
  const std::vector<WorkerProcess>& workers() const { return workers_; }
  pid_t process_group() const { return pgid_; }

  // Sends `signo` to the whole process group (workers and their descendants that stayed in it).
  void signal_all(int signo) const;
  // Records a waitpid() result; returns the worker it belonged to, or nullptr (a reparented
  // grandchild, say).
  WorkerProcess* record_exit(pid_t pid, int wait_status);
  bool all_exited() const;

 private:
  std::vector<WorkerProcess> workers_;
  pid_t pgid_ = -1;
};

// "exit 3", "SIGSEGV (signal 11)" for a waitpid() status.
std::string describe_wait_status(int wait_status);
// The same, short: "exit 3", "SIGSEGV" (as suites compare it).
std::string short_wait_status(int wait_status);

}  // namespace ddx::launcher
