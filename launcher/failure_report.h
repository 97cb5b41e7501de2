#pragma once
// The table `ddx launch` prints when a worker group fails: every rank's outcome, then, for each
// rank that failed on its own, the first error line, the top stack frames and where its logs are.
#include <optional>
#include <string>
#include <vector>

#include "ddx/error_report.h"

namespace ddx::launcher {

enum class WorkerOutcome {
  Succeeded,   // exit 0
  Failed,      // failed before the launcher stopped the group
  Stopped,     // ended by the launcher's SIGTERM/SIGKILL after another rank failed
};

struct WorkerFailureInfo {
  int rank = 0;
  int local_rank = 0;
  std::string host;
  int pid = 0;
  std::string status;                        // "exit 3", "SIGSEGV (signal 11)"
  WorkerOutcome outcome = WorkerOutcome::Failed;
  bool root_cause = false;                   // the first rank to fail, by time
  std::optional<ErrorFileSummary> error;     // from the rank's error file, when it wrote one
  std::string last_stderr_line;              // fallback when there is no error file
  std::string error_file;                    // empty when it is not kept (no --log-dir)
  std::string log_dir;                       // empty without --log-dir
};

// Renders the report; `attempt` counts from 1.
std::string format_failure_report(const std::vector<WorkerFailureInfo>& workers, int attempt,
                                  int attempts_allowed);

}  // namespace ddx::launcher
