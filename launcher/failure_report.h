#pragma once
// The table `ddx launch` prints when a worker group fails: every rank's outcome, then, for each
// rank that failed on its own, the first error line, the top stack frames and where its logs are.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ddx/errors/error_report.h"
#include "ddx/errors/verdict.h"

namespace ddx::launcher {

enum class WorkerOutcome {
  Succeeded,   // exit 0
  Failed,      // failed on its own: before the launcher stopped the group, or with its own error after
  Stopped,     // ended by the launcher's SIGTERM/SIGKILL after another rank failed
  Verdict,     // exited with the verdict its job reported (ddx/errors/verdict.h): the job's answer, not a failure
};

struct WorkerFailureInfo {
  int rank = 0;
  int local_rank = 0;
  std::string host;
  int pid = 0;
  std::string status;                        // "exit 3", "SIGSEGV (signal 11)"
  std::string how;                           // "exit 3", "SIGSEGV"
  WorkerOutcome outcome = WorkerOutcome::Failed;
  bool root_cause = false;                   // set by mark_root_cause
  std::vector<int> same_way;                 // root cause: every rank that failed the same way
  std::chrono::steady_clock::time_point exit_time;
  std::optional<ErrorFileSummary> error;     // from the rank's error file, when it wrote one
  std::optional<JobVerdict> verdict;         // outcome Verdict: the verdict it exited with
  std::string last_stderr_line;              // fallback when there is no error file
  std::string error_file;                    // empty when it is not kept (no --log-dir)
  std::string log_dir;                       // empty without --log-dir
};

// Names the root cause among the ranks that failed on their own: the earliest to exit decides
// how the group failed; of the ranks that failed that same way (exit status and first error
// line, digits aside), the lowest is named and all of them are listed. So a failure every rank
// hits names the same rank on every run, while a crash still wins over the errors it causes
// on the other ranks. Returns the index of the root cause, or -1 when no rank failed.
int mark_root_cause(std::vector<WorkerFailureInfo>& workers);

// Renders the report; `attempt` counts from 1.
std::string format_failure_report(const std::vector<WorkerFailureInfo>& workers, int attempt,
                                  int attempts_allowed);

// The job's verdict when the attempt ended with one and nothing else went wrong: at least one
// rank exited with a verdict, and every other rank succeeded, exited with a verdict too, or was
// stopped by the launcher after them; no rank failed. The lowest rank's verdict (they agree).
std::optional<JobVerdict> job_verdict(const std::vector<WorkerFailureInfo>& workers);

// What the launcher prints instead of the failure table when the job reported a verdict: the
// verdict, and every rank's status, with no root cause (a verdict names who is at fault itself).
std::string format_verdict_report(const std::vector<WorkerFailureInfo>& workers, const JobVerdict& verdict,
                                  int attempt, int attempts_allowed);

}  // namespace ddx::launcher
