// Puts the analysis steps together: findings in priority order (the first is the verdict),
// failures nothing else explains, and the per-rank evidence table.
#include "analyzer/diagnosis.h"

#include <algorithm>
#include <map>
#include <set>

#include "analyzer/analysis_util.h"

namespace ddx::analyze {
namespace {

using detail::describe;
using detail::rank_list;

bool covered(const std::vector<Finding>& findings, int rank) {
  for (const Finding& f : findings) {
    if (std::count(f.culprits.begin(), f.culprits.end(), rank)) return true;
  }
  return false;
}

// Failed ops not explained by another finding, one finding per (group, seq).
std::vector<Finding> unexplained_failures(const TraceSet& traces) {
  std::map<std::pair<std::string, uint64_t>, Finding> by_op;
  for (const auto& [rank, d] : traces.dumps) {
    for (const Entry& e : d.entries) {
      if (!e.failed()) continue;
      Finding& f = by_op[{e.group + (e.p2p ? "/p2p" : ""), e.seq}];
      if (f.affected.empty()) {
        f.kind = FindingKind::Failed;
        f.group = e.group;
        f.seq = e.seq;
        f.p2p = e.p2p;
        f.op = e.op;
        f.call_site = e.call_site;
      }
      f.affected.push_back(rank);
      f.evidence.push_back("rank " + std::to_string(rank) + ": " + e.error.substr(0, e.error.find('\n')));
      f.summary = describe(e) + " failed on " + rank_list(f.affected) + " and nothing shows which rank caused it";
      f.decided_by = "undecided";
    }
  }
  std::vector<Finding> out;
  for (auto& [key, f] : by_op) out.push_back(std::move(f));
  return out;
}

// Why the rank first dumped, in a few words: "timeout", "failed op", "requested by rank 1",
// "SIGUSR2", "SIGTERM", "dead peer", "uncaught exception" (later triggers in parentheses).
std::string trigger_label(const std::string& reason) {
  if (reason.rfind("requested by ", 0) == 0) {
    const size_t colon = reason.find(':');
    return reason.substr(0, colon == std::string::npos ? 24 : colon);
  }
  if (reason.find("has not finished after") != std::string::npos) return "timeout";
  if (reason.find(" failed: ") != std::string::npos) return "failed op";
  if (reason.find("heartbeat stopped") != std::string::npos || reason.find("probably dead") != std::string::npos) {
    return "dead peer";
  }
  if (reason.rfind("SIGUSR2", 0) == 0) return "SIGUSR2";
  if (reason.rfind("SIGTERM", 0) == 0) return "SIGTERM";
  if (reason.rfind("uncaught exception", 0) == 0) return "uncaught exception";
  return reason.substr(0, 24);
}

std::string dump_cell(const RankDump& d) {
  std::string cell = trigger_label(d.triggers.empty() ? d.reason : d.triggers.front());
  const std::string last = trigger_label(d.triggers.empty() ? d.reason : d.triggers.back());
  if (last != cell) cell += " (then " + last + ")";
  return (d.truncated ? "truncated, " : "") + cell;
}

}  // namespace

Diagnosis diagnose(const TraceSet& traces) {
  Diagnosis dx;
  dx.world_size = traces.world_size;
  std::vector<Finding> all = detail::find_collective_problems(traces);
  for (auto& f : detail::find_p2p_deadlocks(traces)) all.push_back(std::move(f));
  for (auto& f : detail::find_dead_ranks(traces)) all.push_back(std::move(f));
  for (auto& f : detail::find_stopped_peers(traces)) all.push_back(std::move(f));
  std::stable_sort(all.begin(), all.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.kind) < static_cast<int>(b.kind);
  });
  // A rank behind in one group because it waits, in another group, on someone else's fault is
  // not where the trouble started: that finding goes after the one that names whom it waits on
  // (a sub-group's missing all_reduce also keeps its members from the world's next one).
  auto waits_elsewhere = [&](const Finding& f, const Finding& other) {
    if (f.kind != FindingKind::NeverJoined && f.kind != FindingKind::Stuck) return false;
    if (other.group == f.group || f.culprits.empty()) return false;
    for (int r : f.culprits) {
      if (std::find(other.affected.begin(), other.affected.end(), r) == other.affected.end()) return false;
      if (std::find(other.culprits.begin(), other.culprits.end(), r) != other.culprits.end()) return false;
    }
    return true;
  };
  std::vector<Finding> roots, consequences;
  for (Finding& f : all) {
    const Finding* cause = nullptr;
    for (const Finding& other : all) {
      if (&other != &f && waits_elsewhere(f, other) && !waits_elsewhere(other, f)) cause = &other;
    }
    if (cause) {
      f.summary += " (it waits on " + detail::rank_list(cause->culprits) + " in group " + cause->group + ")";
      consequences.push_back(f);
    } else {
      roots.push_back(f);
    }
  }
  all = roots;
  all.insert(all.end(), consequences.begin(), consequences.end());
  // A rank named by a stronger finding is not named again by a weaker one of the same group
  // (a deadlocked pair also never joins the next all-reduce).
  for (const Finding& f : all) {
    bool repeat = false;
    if (f.kind >= FindingKind::SkippedCollective) {
      for (int r : f.culprits) repeat = repeat || covered(dx.findings, r);
    }
    if (!repeat) dx.findings.push_back(f);
  }
  if (dx.findings.empty()) {
    for (auto& f : unexplained_failures(traces)) dx.findings.push_back(std::move(f));
  }
  detail::add_pipeline_stages(traces, dx.findings);
  // Evidence table.
  std::set<std::string> groups;
  for (const auto& [rank, d] : traces.dumps) {
    for (const auto& [name, pos] : d.groups) groups.insert(name);
  }
  for (int r = 0; r < traces.world_size; ++r) {
    RankRow row;
    row.rank = r;
    auto it = traces.dumps.find(r);
    if (it == traces.dumps.end()) {
      row.dump = "missing";
      for (const DumpProblem& p : traces.problems) {
        if (p.rank == r) row.dump = p.kind;
      }
      dx.ranks.push_back(row);
      continue;
    }
    const RankDump& d = it->second;
    row.host = d.host;
    row.pid = d.pid;
    row.dump = dump_cell(d);
    for (const std::string& g : groups) {
      if (d.groups.count(g)) row.groups.push_back(g + " " + detail::position_text(d, g));
    }
    for (const Entry* e : detail::blocked_ops(d)) {
      if (e->p2p) row.groups.push_back("blocked in " + describe(*e));
    }
    dx.ranks.push_back(row);
  }
  for (const DumpProblem& p : traces.problems) {
    if (p.rank < 0) {
      dx.notes.push_back(p.detail);  // a file whose name carries no rank
      continue;
    }
    dx.notes.push_back("rank " + std::to_string(p.rank) + ": " + p.kind + " dump (" + p.detail + ")");
  }
  if (dx.findings.empty()) {
    for (const std::string& g : groups) {
      uint64_t lo = UINT64_MAX, hi = 0;
      int ranks = 0;
      for (const auto& [rank, d] : traces.dumps) {
        auto pos = d.groups.find(g);
        if (pos == d.groups.end()) continue;
        lo = std::min(lo, pos->second.last_completed);
        hi = std::max(hi, pos->second.last_enqueued);
        ++ranks;
      }
      dx.notes.push_back("group " + g + ": " + std::to_string(ranks) + " ranks, every one completed #1..#" +
                         std::to_string(lo) + (hi > lo ? " (#" + std::to_string(hi) + " in flight)" : ""));
    }
  }
  return dx;
}

}  // namespace ddx::analyze
