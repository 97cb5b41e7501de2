#include "launcher/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>

#include "ddx/processes/env.h"
#include "ddx/errors/error_report.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/errors/verdict.h"
#include "faults/faults.h"
#include "launcher/failure_report.h"
#include "launcher/orphan_cleanup.h"
#include "launcher/output_pump.h"
#include "launcher/worker_group.h"

namespace ddx::launcher {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// How long the output pump may wait for pipes after the workers are gone.
constexpr auto kOutputDrainTimeout = std::chrono::seconds(2);
// How long the other workers have to exit after the first reported its job's verdict: they
// reached the same verdict together and are only shutting down (ddx/errors/verdict.h).
constexpr auto kVerdictExitWait = std::chrono::seconds(30);

// The signals the launcher waits for with sigtimedwait(): blocked on every thread, so they
// queue up instead of interrupting, and the main loop sleeps until one arrives.
sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, signo);
  return set;
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

void say(const std::string& line) { std::fprintf(stderr, "ddx launch: %s\n", line.c_str()); }

timespec to_timespec(Clock::duration d) {
  if (d < Clock::duration::zero()) d = Clock::duration::zero();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

// Waits up to `timeout` for one of the watched signals; returns it, or 0 on timeout.
int wait_for_signal(Clock::duration timeout) {
  sigset_t set = watched_signals();
  timespec ts = to_timespec(timeout);
  siginfo_t info{};
  int signo = ::sigtimedwait(&set, &info, &ts);
  return signo > 0 ? signo : 0;
}

struct AttemptResult {
  enum class Kind { Succeeded, WorkerFailed, Interrupted } kind = Kind::Succeeded;
  int signal = 0;                   // Interrupted: what the launcher received
  const WorkerProcess* first_failure = nullptr;
  const WorkerProcess* first_verdict = nullptr;  // the first worker that exited with its job's verdict
  Clock::time_point verdict_time;
};

// The verdict a worker exited with: its error file holds one (ddx/errors/verdict.h) with the code it
// exited with. A worker that crashed, or exited with another code, failed.
std::optional<JobVerdict> exit_verdict(const WorkerProcess& w) {
  if (!w.exited || !WIFEXITED(w.wait_status) || WEXITSTATUS(w.wait_status) == 0) return std::nullopt;
  std::optional<JobVerdict> verdict = read_verdict_report(w.slot.error_file);
  if (!verdict || verdict->exit_code != WEXITSTATUS(w.wait_status)) return std::nullopt;
  return verdict;
}

// Reaps every exited child; notes the first worker failure, and the first verdict (not a failure).
void reap(WorkerGroup& group, AttemptResult& result) {
  int status = 0;
  for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
    WorkerProcess* worker = group.record_exit(pid, status);
    if (!worker || !worker->failed()) continue;
    if (exit_verdict(*worker)) {
      if (!result.first_verdict) {
        result.first_verdict = worker;
        result.verdict_time = Clock::now();
      }
    } else if (!result.first_failure) {
      result.first_failure = worker;
    }
  }
}

AttemptResult watch(WorkerGroup& group, const LaunchOptions& options) {
  AttemptResult result;
  auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.monitor_interval_s));
  for (;;) {
    reap(group, result);
    if (result.first_failure) {
      result.kind = AttemptResult::Kind::WorkerFailed;
      return result;
    }
    if (group.all_exited()) return result;
    // A verdict ends the job as every worker exits with it; one that does not is stopped.
    if (result.first_verdict && Clock::now() - result.verdict_time >= kVerdictExitWait) return result;
    int signo = wait_for_signal(interval);  // SIGCHLD wakes it at once
    if (signo == SIGINT || signo == SIGTERM || signo == SIGHUP) {
      result.kind = AttemptResult::Kind::Interrupted;
      result.signal = signo;
      return result;
    }
  }
}

// Sends `first_signal` to the group, waits up to the grace period, then SIGKILLs what is left.
// A second SIGINT/SIGTERM to the launcher cuts the grace period short, like torchrun's.
void stop_group(WorkerGroup& group, const LaunchOptions& options, int first_signal, AttemptResult& result) {
  reap(group, result);
  if (!group.all_exited()) {
    group.signal_all(first_signal);
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options.grace_period_s));
    while (!group.all_exited() && Clock::now() < deadline) {
      int signo = wait_for_signal(deadline - Clock::now());
      reap(group, result);
      if (signo == SIGINT || signo == SIGTERM || signo == SIGHUP) break;
    }
  }
  if (!group.all_exited()) {
    group.signal_all(SIGKILL);
    for (auto& w : group.workers()) {
      int status = 0;
      if (!w.exited && ::waitpid(w.pid, &status, 0) == w.pid) group.record_exit(w.pid, status);
    }
  }
  // Anything still in the group (a worker's children) and anything reparented to us.
  group.signal_all(SIGKILL);
  kill_remaining_children();
}

std::vector<OutputStream> output_streams(const WorkerGroup& group, const LaunchOptions& options) {
  std::vector<OutputStream> streams;
  bool console = options.log_dir.empty() || options.tee;
  for (const auto& w : group.workers()) {
    for (bool is_stderr : {false, true}) {
      OutputStream s;
      s.fd = is_stderr ? w.stderr_fd : w.stdout_fd;
      s.rank = w.slot.rank;
      s.is_stderr = is_stderr;
      s.to_console = console;
      s.is_report = !is_stderr && w.slot.rank == 0;
      if (!w.log_dir.empty()) s.log_path = w.log_dir + (is_stderr ? "/stderr.log" : "/stdout.log");
      streams.push_back(s);
    }
  }
  return streams;
}

// Whether the launcher's own stop ended the worker: its signal (or SIGKILL after the grace
// period), or the exit code a shell gives for it. Any other status is the worker's own error.
bool ended_by_stop(int wait_status, int stop_signal) {
  if (WIFSIGNALED(wait_status)) return WTERMSIG(wait_status) == stop_signal || WTERMSIG(wait_status) == SIGKILL;
  const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 0;
  return code == 128 + stop_signal || code == 128 + SIGKILL;
}

std::vector<WorkerFailureInfo> describe_workers(const WorkerGroup& group, const OutputPump& pump,
                                                Clock::time_point stop_started, int stop_signal) {
  std::vector<WorkerFailureInfo> infos;
  std::string host = hostname();
  for (const auto& w : group.workers()) {
    WorkerFailureInfo info;
    info.rank = w.slot.rank;
    info.local_rank = w.slot.local_rank;
    info.host = host;
    info.pid = static_cast<int>(w.pid);
    info.status = describe_wait_status(w.wait_status);
    info.how = short_wait_status(w.wait_status);
    info.exit_time = w.exit_time;
    info.verdict = exit_verdict(w);
    if (!w.failed()) {
      info.outcome = WorkerOutcome::Succeeded;
    } else if (info.verdict) {
      info.outcome = WorkerOutcome::Verdict;
    } else if (w.exit_time <= stop_started || !ended_by_stop(w.wait_status, stop_signal)) {
      info.outcome = WorkerOutcome::Failed;
    } else {
      info.outcome = WorkerOutcome::Stopped;
    }
    // Without --log-dir the error files live in a temporary directory removed on exit.
    if (!w.log_dir.empty()) info.error_file = w.slot.error_file;
    info.error = read_error_file(w.slot.error_file);
    info.last_stderr_line = pump.last_stderr_line(w.slot.rank);
    info.log_dir = w.log_dir;
    infos.push_back(std::move(info));
  }
  return infos;
}

// Where the per-attempt directories go: under --log-dir, or a temporary directory the launcher
// owns and removes when it is done.
class RunDirectory {
 public:
  explicit RunDirectory(const std::string& log_dir) {
    if (!log_dir.empty()) {
      fs::create_directories(log_dir);
      path_ = log_dir;
      return;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddx-launch-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("ddx launch: cannot create " + pattern);
    path_ = pattern;
    owned_ = true;
  }
  ~RunDirectory() {
    std::error_code ignored;
    if (owned_) fs::remove_all(path_, ignored);
  }
  std::string attempt(int k) const { return path_ + "/attempt_" + std::to_string(k); }

 private:
  std::string path_;
  bool owned_ = false;
};

// Like torchrun's @record on its own main: when the launcher itself was given an error file, the
// root cause's report ends up there, so an outer launcher or scheduler sees the real error.
void copy_root_cause_error_file(const EnvMap& launcher_env, const std::string& root_error_file) {
  std::optional<std::string> target = env_get(launcher_env, "TORCHELASTIC_ERROR_FILE");
  if (!target || target->empty() || !fs::exists(root_error_file)) return;
  std::error_code error;
  fs::copy_file(root_error_file, *target, fs::copy_options::overwrite_existing, error);
  if (error) say("could not copy the root cause's error file to " + *target + ": " + error.message());
}

// When a worker exited, in microseconds of the wall clock.
int64_t wall_clock_us(Clock::time_point when) {
  const auto wall = std::chrono::system_clock::now() -
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(Clock::now() - when);
  return std::chrono::duration_cast<std::chrono::microseconds>(wall.time_since_epoch()).count();
}

// " at 14:20:01.123456 UTC": when a worker exited, on the wall clock. Across nodes each launcher
// sees only its own workers; the node whose root cause came first holds the job's (an outer
// tool such as `ddx fault matrix` compares them; the nodes' clocks must agree, as NTP keeps them).
std::string wall_clock_text(Clock::time_point when) {
  const int64_t us = wall_clock_us(when);
  const time_t seconds = static_cast<time_t>(us / 1000000);
  tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[48];
  std::snprintf(text, sizeof text, " at %02d:%02d:%02d.%06lld UTC", utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<long long>(us % 1000000));
  return text;
}

}  // namespace

int run_supervised(const LaunchOptions& options) {
  become_child_subreaper();
  // A closed console (`ddx launch ... | head`) must not kill the launcher and, through
  // PDEATHSIG, the job; writes just fail. Workers start with default dispositions again.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t watched = watched_signals();
  ::pthread_sigmask(SIG_BLOCK, &watched, nullptr);

  EnvMap launcher_env = current_env();
  if (should_default_omp_threads(launcher_env)) {
    say("setting OMP_NUM_THREADS=1 for each worker to avoid overloading the CPU (ddx's own workers "
        "use cores / workers per node, as under srun); set it yourself to tune");
  }
  RunDirectory run_dir(options.log_dir);
  int world_size = options.nnodes * options.nproc_per_node;
  int attempts_allowed = options.max_restarts + 1;
  // Workers inherit DDX_FAULT and get any --fault: the start line says so, never a clean-looking run.
  const std::string fault_note = faults::launch_note(launcher_env, options.command);
  say("starting " + std::to_string(options.nproc_per_node) + " workers (node " +
      std::to_string(options.node_rank) + " of " + std::to_string(options.nnodes) +
      ", world size " + std::to_string(world_size) + ", master " + options.master_addr + ":" +
      std::to_string(options.master_port) + ", run id " + options.run_id + ")" +
      (fault_note.empty() ? "" : "; " + fault_note));
  events::Event("launch.started")
      .number("node", options.node_rank)
      .number("nnodes", options.nnodes)
      .number("workers", options.nproc_per_node)
      .number("world_size", world_size)
      .emit();

  for (int restart = 0; restart < attempts_allowed; ++restart) {
    WorkerGroup group = WorkerGroup::spawn(options, launcher_env, restart, run_dir.attempt(restart),
                                           !options.log_dir.empty());
    OutputPump pump(output_streams(group, options));
    AttemptResult result = watch(group, options);
    Clock::time_point stop_started = Clock::now();
    int stop_signal = result.kind == AttemptResult::Kind::Interrupted ? result.signal : SIGTERM;
    stop_group(group, options, stop_signal, result);
    pump.finish(kOutputDrainTimeout);

    if (result.kind == AttemptResult::Kind::Interrupted) {
      say("received " + signal_name(result.signal) + "; forwarded it to the workers and stopped them");
      return 128 + result.signal;
    }
    if (result.kind == AttemptResult::Kind::Succeeded && !result.first_failure && !result.first_verdict) {
      if (restart > 0) say("all workers succeeded on attempt " + std::to_string(restart + 1));
      events::Event("launch.succeeded").number("attempt", restart + 1).emit();
      return 0;
    }
    std::vector<WorkerFailureInfo> workers = describe_workers(group, pump, stop_started, stop_signal);
    // A verdict is the job's answer, not a failure: reported as such, with its code, and final
    // (a restart would only ask the same question again).
    if (const std::optional<JobVerdict> verdict = job_verdict(workers)) {
      events::Event("launch.verdict")
          .number("attempt", restart + 1)
          .number("exit_code", verdict->exit_code)
          .text("verdict", verdict->message)
          .emit();
      std::fputs(format_verdict_report(workers, *verdict, restart + 1, attempts_allowed).c_str(), stderr);
      return verdict->exit_code;
    }
    // The worker that ended the attempt failed before the stop, so there is a root cause.
    const int root = mark_root_cause(workers);
    // The attempt's root cause, for suites: a rank, how it ended and when (across nodes, the
    // earliest is the job's).
    events::Event("launch.attempt_failed")
        .number("attempt", restart + 1)
        .number("rank", workers[root].rank)
        .text("how", workers[root].how)
        .text("status", workers[root].status)
        .text("host", workers[root].host)
        .number("exit_unix_us", wall_clock_us(workers[root].exit_time))
        .number("restarting", restart + 1 < attempts_allowed ? 1 : 0)
        .emit();
    if (restart + 1 < attempts_allowed) {
      const std::string when = options.nnodes > 1 ? wall_clock_text(workers[root].exit_time) : "";
      say("attempt " + std::to_string(restart + 1) + " failed: rank " + std::to_string(workers[root].rank) +
          " " + workers[root].status + when + "; restarting the worker group (restart " +
          std::to_string(restart + 1) + " of " + std::to_string(options.max_restarts) + ")");
      continue;
    }
    copy_root_cause_error_file(launcher_env, group.workers()[root].slot.error_file);
    std::fputs(format_failure_report(workers, restart + 1, attempts_allowed).c_str(), stderr);
    return 1;
  }
  return 1;
}

}  // namespace ddx::launcher
