// How the matrix reads each detector's finding back from a job: the lines the detector itself
// prints (the launcher's failure lines, the watchdog, --nan-check, --replica-check-freq, the
// straggler warning, the checkpoint checksum warning) and the analyzer's verdict JSON. One entry
// per detector; the flags are what `ddx train` needs to turn it on (the self-test leaves them out).
// "pairwise links" reads the pairwise bandwidth probe's slow-rank list; "bus-error cause" the
// fatal-signal report of a rank killed by SIGBUS on a full tmpfs; "store check" the line of any
// rank that lost the rendezvous store.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "ddx/run_process.h"
#include "ddx/text.h"
#include "harness/fault_matrix/matrix.h"

namespace ddx::faults::matrix {
namespace {

// "rank 3" or "ranks 0,2" at `pos` of `text`, normalised by ranks_text; "" when there is none.
std::string ranks_at(const std::string& text, size_t pos) {
  if (text.compare(pos, 5, "rank ") == 0) {
    pos += 5;
  } else if (text.compare(pos, 6, "ranks ") == 0) {
    pos += 6;
  } else {
    return "";
  }
  std::vector<int> ranks;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) != 0) {
    int r = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) != 0) r = r * 10 + (text[pos++] - '0');
    ranks.push_back(r);
    if (pos + 1 < text.size() && text[pos] == ',' && std::isdigit(static_cast<unsigned char>(text[pos + 1])) != 0) ++pos;
  }
  return ranks.empty() ? "" : ranks_text(ranks);
}

// The first line containing `marker` with a rank list right after it.
Finding first_ranks_after(const JobEvidence& job, const std::string& marker) {
  for (const TimedLine& line : job.lines) {
    const size_t at = line.text.find(marker);
    if (at == std::string::npos) continue;
    const std::string culprit = ranks_at(line.text, at + marker.size());
    if (!culprit.empty()) return {true, culprit, line.at_s, line.text};
  }
  return {};
}

// Seconds into the UTC day of a launcher line's " at 14:20:01.123456 UTC" (across nodes), or -1.
double failure_time(const std::string& line) {
  const size_t at = line.find(" at ");
  int h = 0, m = 0;
  double sec = 0;
  if (at == std::string::npos || line.find(" UTC", at) == std::string::npos ||
      std::sscanf(line.c_str() + at, " at %d:%d:%lf UTC", &h, &m, &sec) != 3) {
    return -1;
  }
  return h * 3600.0 + m * 60.0 + sec;
}

// How the launcher says a rank ended, cut to its signal or exit code: "SIGKILL (signal 9) at
// 14:20:01.1 UTC; restarting ..." and "exit 3; restarting ..." give "SIGKILL" and "exit 3".
std::string launcher_status(const std::string& text) {
  size_t end = text.size();
  for (const char* stop : {" (signal ", " at ", ";"}) end = std::min(end, text.find(stop));
  std::string status = text.substr(0, end);
  while (!status.empty() && std::isspace(static_cast<unsigned char>(status.back())) != 0) status.pop_back();
  return status;
}

// The status after the rank of a failure line: "attempt 1 failed: rank 3 SIGKILL ..." or
// "Root cause: rank 3 (local rank 3) on host, pid 9: SIGKILL (signal 9)".
std::string status_after_rank(const std::string& text, size_t rank_at) {
  const size_t pid = text.find(", pid ", rank_at);
  if (pid != std::string::npos) {
    const size_t colon = text.find(": ", pid);
    return colon == std::string::npos ? "" : launcher_status(text.substr(colon + 2));
  }
  size_t pos = text.find(' ', rank_at + 5);  // past "rank N"
  return pos == std::string::npos ? "" : launcher_status(text.substr(pos + 1));
}

// The launcher: the rank its failure line names as the first to fail, and how it ended
// ("attempt 1 failed: rank 3 SIGKILL ..." when it restarts, "Root cause: rank 3 ...: SIGKILL" in
// the failure table when it does not).
// Across nodes every node's launcher names its own first failure, with when it happened: the
// earliest is the job's (a rank of another node fails only after the culprit did).
Finding launcher(const JobEvidence& job) {
  const std::string marker = "ddx launch: attempt 1 failed: ";
  Finding restart;
  double first = -1;
  for (const TimedLine& line : job.lines) {
    const size_t at = line.text.find(marker);
    if (at == std::string::npos) continue;
    const std::string culprit = ranks_at(line.text, at + marker.size());
    const double when = failure_time(line.text);
    if (culprit.empty() || (restart.fired && (when < 0 || first < 0 || when >= first))) continue;
    restart = {true, culprit, line.at_s, line.text, status_after_rank(line.text, at + marker.size())};
    first = when;
  }
  Finding table = first_ranks_after(job, "Root cause: ");
  if (table.fired) table.how = status_after_rank(table.evidence, table.evidence.find("Root cause: ") + 12);
  if (restart.fired && (!table.fired || restart.at_s <= table.at_s)) return restart;
  return table;
}

// The collective timeout's watchdog says when it saw the hang (its "<- behind" line); the
// analyzer, run on the flight-recorder dumps afterwards, names the culprit.
Finding watchdog_and_analyzer(const JobEvidence& job) {
  Finding f;
  for (const TimedLine& line : job.lines) {
    if (line.text.find("ddx watchdog: ") != std::string::npos && line.text.find("<- behind") != std::string::npos) {
      f.at_s = line.at_s;
      break;
    }
  }
  const std::string traces = job.dir + "/traces";
  if (!std::filesystem::is_directory(traces)) return f;  // nothing was dumped
  const std::string out = job.dir + "/analyze.json";
  run_process({self_executable(), "analyze", "--json", traces}, {}, out, 120);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t brace = text.find("\n{") == std::string::npos ? text.find('{') : text.find("\n{") + 1;
  if (brace == std::string::npos) return f;
  const auto doc = nlohmann::json::parse(text.substr(brace), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("verdict") || !doc["verdict"].is_object()) return f;
  const auto& culprits = doc["verdict"].value("culprits", nlohmann::json::array());
  if (!culprits.is_array() || culprits.empty()) return f;
  f.fired = true;
  f.culprit = ranks_text(culprits.get<std::vector<int>>());
  f.evidence = "analyze.json: " + doc["verdict"].value("summary", std::string());
  return f;
}

// --check-collectives: "collective mismatch at world #16: rank 1 called ..., but ranks 0,2,3
// called ... (majority 3 of 4)"; the minority comes first, so the first ranks are the culprit.
Finding collective_check(const JobEvidence& job) {
  for (const TimedLine& line : job.lines) {
    const size_t at = line.text.find("collective mismatch at ");
    if (at == std::string::npos) continue;
    const size_t colon = line.text.find(": ", at);
    if (colon == std::string::npos) continue;
    const std::string culprit = ranks_at(line.text, colon + 2);
    if (!culprit.empty()) return {true, culprit, line.at_s, line.text};
  }
  return {};
}

// A rank that lost the rendezvous store (its watchdog's heartbeat, or its check-out at the end of
// the run): "the rendezvous store at 127.0.0.1:29500 (hosted by rank 0) is unreachable since ...";
// the culprit is the rank that hosted it.
Finding store_check(const JobEvidence& job) {
  JobEvidence lost = job;
  lost.lines.clear();
  std::copy_if(job.lines.begin(), job.lines.end(), std::back_inserter(lost.lines),
               [](const TimedLine& l) { return l.text.find(") is unreachable since ") != std::string::npos; });
  return first_ranks_after(lost, "(hosted by ");
}

Finding nan_check(const JobEvidence& job) { return first_ranks_after(job, "non-finite gradient first on "); }

// "data-parallel replica on rank 3 diverges ..." or "... replicas on ranks 0,1 and ranks 2,3 disagree ...".
Finding replica_check(const JobEvidence& job) {
  Finding one = first_ranks_after(job, "data-parallel replica on ");
  return one.fired ? one : first_ranks_after(job, "data-parallel replicas on ");
}

// `ddx probe bandwidth --pairs`: "# Slow ranks (...):" then "#   rank 3 (host vm, local rank 3): ...".
Finding pairwise_links(const JobEvidence& job) {
  JobEvidence after = job;
  const auto header = std::find_if(job.lines.begin(), job.lines.end(),
                                   [](const TimedLine& l) { return l.text.find("# Slow ranks") != std::string::npos; });
  after.lines.assign(header, job.lines.end());
  return first_ranks_after(after, "#   ");
}

Finding straggler_warning(const JobEvidence& job) { return first_ranks_after(job, "straggler: "); }

// A checkpoint named corrupt on resume ("checkpoint <dir>/step_000000010 is corrupt: ...").
Finding checksum(const JobEvidence& job) {
  for (const TimedLine& line : job.lines) {
    const size_t corrupt = line.text.find(" is corrupt: ");
    const size_t step = line.text.rfind("/step_", corrupt);
    if (corrupt == std::string::npos || step == std::string::npos) continue;
    const std::string digits = line.text.substr(step + 6, corrupt - step - 6);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    return {true, "checkpoint step " + std::to_string(std::stoll(digits)), line.at_s, line.text};
  }
  return {};
}

// The fatal-signal report of a SIGBUS whose address is in a file on a full tmpfs ("... a file on
// a tmpfs (/dev/shm) with 0.0 of 64.0 MiB free: shared memory is exhausted ..."), on the console
// of the rank it killed ("[rank 3]: ...", as ddx launch prefixes each rank's lines).
Finding bus_error_cause(const JobEvidence& job) {
  for (const TimedLine& line : job.lines) {
    if (line.text.find("shared memory is exhausted") == std::string::npos || line.text.rfind("[", 0) != 0) continue;
    const std::string culprit = ranks_at(line.text, 1);
    if (!culprit.empty()) return {true, culprit, line.at_s, line.text};
  }
  return {};
}

}  // namespace

const std::vector<Detector>& detectors() {
  static const std::vector<Detector> all = {
      {"launcher", {}, launcher},
      {"watchdog+analyzer", {}, watchdog_and_analyzer},
      {"nan-check", {"--nan-check"}, nan_check},
      {"collective check", {"--check-collectives"}, collective_check},
      {"store check", {}, store_check},
      {"replica-check", {"--replica-check-freq", "1"}, replica_check},
      {"straggler warning", {"--straggler-factor", "5", "--straggler-window", "0.5"}, straggler_warning,
       {"--straggler-factor", "0"}},  // on by default in ddx train (factor 2)
      {"pairwise links", {}, pairwise_links},
      {"checksum", {}, checksum},
      {"bus-error cause", {}, bus_error_cause},
  };
  return all;
}

const Detector* find_detector(const std::string& name) {
  for (const Detector& d : detectors()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace ddx::faults::matrix
