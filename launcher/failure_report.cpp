#include "launcher/failure_report.h"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <sstream>

#include "ddx/text/text.h"

namespace ddx::launcher {
namespace {

constexpr size_t kFramesShown = 3;

std::string outcome_text(const WorkerFailureInfo& w) {
  if (w.root_cause) return "ROOT CAUSE";
  switch (w.outcome) {
    case WorkerOutcome::Succeeded: return "ok";
    case WorkerOutcome::Failed: return "failed";
    case WorkerOutcome::Stopped: return "stopped by launcher";
    case WorkerOutcome::Verdict: return "verdict";
  }
  return "";
}

std::string frame_text(const StackFrame& f) {
  std::string text = f.function.empty() ? "??" : f.function;
  if (!f.file.empty()) text += " at " + f.file + ":" + std::to_string(f.line);
  return text;
}

// How a rank failed, for grouping identical failures: status and first error line with every
// run of digits as '#', so "rank 1 ..." and "rank 3 ..." (or pids) compare equal.
std::string failure_way(const WorkerFailureInfo& w) {
  std::string text = w.status + "\n" + (w.error ? w.error->message : w.last_stderr_line);
  std::string out;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      out += c;
    } else if (out.empty() || out.back() != '#') {
      out += '#';
    }
  }
  return out;
}

void print_details(std::ostringstream& out, const WorkerFailureInfo& w) {
  out << "\n" << (w.root_cause ? "Root cause" : "Also failed") << ": rank " << w.rank
      << " (local rank " << w.local_rank << ") on " << w.host << ", pid " << w.pid << ": "
      << w.status << "\n";
  if (w.same_way.size() > 1) {
    out << "  " << w.same_way.size() << " ranks failed the same way: " << ranks_text(w.same_way) << "\n";
  }
  if (w.error) {
    if (!w.error->message.empty()) out << "  error:  " << w.error->message << "\n";
    size_t shown = std::min(kFramesShown, w.error->frames.size());
    for (size_t i = 0; i < shown; ++i) {
      out << (i == 0 ? "  stack:  " : "          ") << "#" << i << " " << frame_text(w.error->frames[i]) << "\n";
    }
    if (!w.error_file.empty()) out << "  error file: " << w.error_file << "\n";
  } else if (!w.last_stderr_line.empty()) {
    out << "  last stderr line: " << w.last_stderr_line << "\n";
    out << "  (no error file: the worker exited without one; see its stderr)\n";
  } else {
    out << "  (no error file and no stderr output)\n";
  }
  if (!w.log_dir.empty()) {
    out << "  logs:   " << w.log_dir << "/stdout.log, " << w.log_dir << "/stderr.log\n";
  }
}

// One row per rank: rank, local rank, host, pid, status, outcome.
void print_table(std::ostringstream& out, const std::vector<WorkerFailureInfo>& workers) {
  size_t host_width = 4;
  for (const auto& w : workers) host_width = std::max(host_width, w.host.size());
  auto row = [&](const std::string& rank, const std::string& local, const std::string& host,
                 const std::string& pid, const std::string& status, const std::string& outcome) {
    out << "  " << std::left << std::setw(6) << rank << std::setw(7) << local
        << std::setw(static_cast<int>(host_width) + 2) << host << std::setw(9) << pid
        << std::setw(22) << status << outcome << "\n";
  };
  row("rank", "local", "host", "pid", "status", "outcome");
  for (const auto& w : workers) {
    row(std::to_string(w.rank), std::to_string(w.local_rank), w.host, std::to_string(w.pid),
        w.status, outcome_text(w));
  }
}

}  // namespace

int mark_root_cause(std::vector<WorkerFailureInfo>& workers) {
  int first = -1;
  for (size_t i = 0; i < workers.size(); ++i) {
    workers[i].root_cause = false;
    workers[i].same_way.clear();
    if (workers[i].outcome != WorkerOutcome::Failed) continue;
    if (first < 0 || workers[i].exit_time < workers[first].exit_time ||
        (workers[i].exit_time == workers[first].exit_time && workers[i].rank < workers[first].rank)) {
      first = static_cast<int>(i);
    }
  }
  if (first < 0) return -1;
  const std::string way = failure_way(workers[first]);
  int root = -1;
  std::vector<int> ranks;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (workers[i].outcome != WorkerOutcome::Failed || failure_way(workers[i]) != way) continue;
    ranks.push_back(workers[i].rank);
    if (root < 0 || workers[i].rank < workers[root].rank) root = static_cast<int>(i);
  }
  std::sort(ranks.begin(), ranks.end());
  workers[root].root_cause = true;
  workers[root].same_way = ranks;
  return root;
}

std::string format_failure_report(const std::vector<WorkerFailureInfo>& workers, int attempt,
                                  int attempts_allowed) {
  std::ostringstream out;
  out << "ddx launch: worker group failed (attempt " << attempt << " of " << attempts_allowed
      << ")\n";
  print_table(out, workers);
  // Root cause first, then the other independent failures.
  for (const auto& w : workers) {
    if (w.root_cause) print_details(out, w);
  }
  // Ranks that failed the same way as the root cause are listed with it, not repeated.
  std::vector<int> same_way;
  for (const auto& w : workers) {
    if (w.root_cause) same_way = w.same_way;
  }
  for (const auto& w : workers) {
    const bool listed = std::find(same_way.begin(), same_way.end(), w.rank) != same_way.end();
    if (!w.root_cause && !listed && w.outcome == WorkerOutcome::Failed) print_details(out, w);
  }
  return out.str();
}

std::optional<JobVerdict> job_verdict(const std::vector<WorkerFailureInfo>& workers) {
  const WorkerFailureInfo* first = nullptr;
  for (const auto& w : workers) {
    if (w.outcome == WorkerOutcome::Failed) return std::nullopt;
    if (w.outcome == WorkerOutcome::Verdict && w.verdict && (!first || w.rank < first->rank)) first = &w;
  }
  if (!first) return std::nullopt;
  return first->verdict;
}

std::string format_verdict_report(const std::vector<WorkerFailureInfo>& workers, const JobVerdict& verdict,
                                  int attempt, int attempts_allowed) {
  std::ostringstream out;
  out << "ddx launch: the job reported a verdict (exit " << verdict.exit_code << ", attempt " << attempt << " of "
      << attempts_allowed << "): " << verdict.message << "\n";
  print_table(out, workers);
  std::vector<int> stopped;
  for (const auto& w : workers) {
    if (w.outcome == WorkerOutcome::Stopped) stopped.push_back(w.rank);
  }
  out << "No rank failed: the job ran to its verdict, which names what is at fault.";
  if (!stopped.empty()) {
    out << " (" << ranks_text(stopped) << " did not exit after it and "
        << (stopped.size() == 1 ? "was" : "were") << " stopped by the launcher.)";
  }
  out << "\n";
  return out.str();
}

}  // namespace ddx::launcher
