// How the matrix reads each detector's finding back from a job: the job events the detector
// itself records (ddx/watchdog/job_events.h: the launcher's failures, the watchdog, --nan-check,
// --replica-check-freq, --check-collectives, the straggler warning, the checkpoint checksums,
// the store's loss, the pairwise probe's slow ranks, the bus-error cause of the fatal-signal
// report) and the analyzer's verdict JSON, never the wording of their log lines. One entry per
// detector; the flags are what `ddx train` needs to turn it on (the self-test leaves them out).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "ddx/text/text.h"
#include "harness/common/analyze_verdict.h"
#include "harness/fault_matrix/matrix.h"

namespace ddx::faults::matrix {
namespace {

using nlohmann::json;

std::string rank_text(int rank) { return "rank " + std::to_string(rank); }

// A finding from `e` naming `culprit`, when it is at `e`.
Finding found(const JobEvidence& job, const JobEvent* e, const std::string& culprit) {
  if (e == nullptr || culprit.empty()) return {};
  return {true, culprit, job.at_s(*e), e->record.dump(-1, ' ', false, json::error_handler_t::replace)};
}

// The ranks of `key` in a record ("ranks": [0, 2] -> "ranks 0,2"), "" when there are none.
std::string ranks_of(const json& record, const char* key) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_array() || it->empty()) return "";
  return ranks_text(it->get<std::vector<int>>());
}

bool has_rank(const json& record, const char* key) { return record.value(key, -1) >= 0; }

// The launcher: the rank it names as the first to fail, and how it ended. Across nodes every
// node's launcher names its own first failure with when it happened: the earliest is the job's
// (a rank of another node fails only after the culprit did). The first attempt's counts; a job
// whose fault strikes on every attempt fails the same way again after its restarts.
Finding launcher(const JobEvidence& job) {
  const JobEvent* earliest = nullptr;
  for (int attempt : {1, 0}) {  // 0: any attempt, when the first left no record
    for (const JobEvent& e : job.events) {
      if (e.name != "launch.attempt_failed" || !has_rank(e.record, "rank")) continue;
      if (attempt != 0 && e.record.value("attempt", 0) != attempt) continue;
      if (!earliest || e.record.value("exit_unix_us", int64_t{0}) < earliest->record.value("exit_unix_us", int64_t{0})) {
        earliest = &e;
      }
    }
    if (earliest) break;
  }
  if (!earliest) return {};
  Finding f = found(job, earliest, rank_text(earliest->record.at("rank").get<int>()));
  f.how = earliest->record.value("how", "");
  return f;
}

// The collective timeout's watchdog says when it saw the hang (the ranks behind); the analyzer,
// run on the flight-recorder dumps afterwards, names the culprit.
Finding watchdog_and_analyzer(const JobEvidence& job) {
  Finding f;
  if (const JobEvent* behind = job.first("watchdog.behind")) f.at_s = job.at_s(*behind);
  const std::string traces = job.dir + "/traces";
  if (!std::filesystem::is_directory(traces)) return f;  // nothing was dumped
  const harness::AnalyzeVerdict verdict = harness::analyze_traces(traces, job.dir + "/analyze.json");
  if (!verdict.problem_found || verdict.culprits.empty()) return f;
  f.fired = true;
  f.culprit = ranks_text(verdict.culprits);
  f.evidence = "analyze.json: " + verdict.summary;
  return f;
}

// --check-collectives: the ranks off the majority of a mismatched collective. A tie names no
// one (each side blames the other).
Finding collective_check(const JobEvidence& job) {
  const JobEvent* e = job.first("collective_check.mismatch", [](const json& r) {
    return r.value("majority", 0) == 1 && !ranks_of(r, "ranks").empty();
  });
  return e ? found(job, e, ranks_of(e->record, "ranks")) : Finding{};
}

// A rank that lost the rendezvous store (its watchdog's heartbeat, a collective check, or its
// check-out at the end of the run): the culprit is the rank that hosted it.
Finding store_check(const JobEvidence& job) {
  const JobEvent* e = job.first("store.unreachable", [](const json& r) { return has_rank(r, "host_rank"); });
  return e ? found(job, e, rank_text(e->record.at("host_rank").get<int>())) : Finding{};
}

// The first rank with a non-finite gradient.
Finding nan_check(const JobEvidence& job) {
  const JobEvent* e = job.first("nan_check.nonfinite", [](const json& r) { return has_rank(r, "first_rank"); });
  return e ? found(job, e, rank_text(e->record.at("first_rank").get<int>())) : Finding{};
}

// Data-parallel replicas whose parameters diverged from the others'.
Finding replica_check(const JobEvidence& job) {
  const JobEvent* e = job.first("replica_check.diverged", [](const json& r) {
    return r.value("copies", "") == "data-parallel replica" && !ranks_of(r, "ranks").empty();
  });
  return e ? found(job, e, ranks_of(e->record, "ranks")) : Finding{};
}

// `ddx probe bandwidth --pairs`: the slow ranks of the link matrix.
Finding pairwise_links(const JobEvidence& job) {
  const JobEvent* e = job.first("bandwidth.slow_ranks", [](const json& r) { return !ranks_of(r, "ranks").empty(); });
  return e ? found(job, e, ranks_of(e->record, "ranks")) : Finding{};
}

Finding straggler_warning(const JobEvidence& job) {
  const JobEvent* e = job.first("straggler.warning", [](const json& r) { return has_rank(r, "rank"); });
  return e ? found(job, e, rank_text(e->record.at("rank").get<int>())) : Finding{};
}

// A checkpoint found corrupt on resume (its checksums).
Finding checksum(const JobEvidence& job) {
  const JobEvent* e = job.first("checkpoint.corrupt", [](const json& r) { return r.value("step", int64_t{-1}) >= 0; });
  return e ? found(job, e, "checkpoint step " + std::to_string(e->record.at("step").get<int64_t>())) : Finding{};
}

// The fatal-signal report of a SIGBUS whose address is in a file on a full tmpfs: the rank it killed.
Finding bus_error_cause(const JobEvidence& job) {
  const JobEvent* e = job.first("bus_error.shm_exhausted", [](const json& r) { return has_rank(r, "rank"); });
  return e ? found(job, e, rank_text(e->record.at("rank").get<int>())) : Finding{};
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
