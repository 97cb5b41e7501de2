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
        detail::place_at(f, e);
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

// Whether `rank` issued its collectives, across all its groups, in another order than most
// ranks did: at some record number its call (its recorded stack, else its call site) differs from
// the one most ranks made there. Record numbers count every op a rank recorded, so they line
// up across ranks that run the same program.
bool leaves_program_order(const TraceSet& traces, int rank) {
  auto site = [](const Entry& e) {
    std::string s;
    for (const std::string& frame : e.stack) s += frame + "|";
    return s.empty() ? e.call_site : s;
  };
  // A dump's entries are in record order: its entry with a record number, by bisection.
  auto at_record = [](const RankDump& d, uint64_t id) -> const Entry* {
    auto it = std::lower_bound(d.entries.begin(), d.entries.end(), id,
                               [](const Entry& x, uint64_t wanted) { return x.id < wanted; });
    return it != d.entries.end() && it->id == id ? &*it : nullptr;
  };
  auto mine = traces.dumps.find(rank);
  if (mine == traces.dumps.end()) return false;
  for (const Entry& e : mine->second.entries) {
    const std::string own = site(e);
    if (own.empty()) continue;
    std::map<std::string, int> votes;
    for (const auto& [r, d] : traces.dumps) {
      if (r == rank) continue;
      if (const Entry* x = at_record(d, e.id)) ++votes[site(*x)];
    }
    if (votes.empty()) continue;
    const auto top = std::max_element(votes.begin(), votes.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
    if (top->first != own && top->second * 2 > static_cast<int>(traces.dumps.size() - 1)) return true;
  }
  return false;
}

// Collectives still in flight past their timeout that nothing else explains. A rank alone in its
// group (a world of one, a one-rank sub-group) stuck in one is the culprit: its own device work
// never finished it. Where every member is in it, nothing shows which rank is to blame.
std::vector<Finding> stuck_past_timeout(const TraceSet& traces) {
  std::map<std::pair<std::string, uint64_t>, Finding> by_op;
  for (const auto& [rank, d] : traces.dumps) {
    if (d.collective_timeout_ms <= 0) continue;
    for (const Entry& e : d.entries) {
      if (!e.in_flight() || e.enqueue_us <= 0) continue;
      const double age = d.seconds_before_dump(e.enqueue_us);
      if (age * 1000 < d.collective_timeout_ms) continue;
      Finding& f = by_op[{e.group + (e.p2p ? "/p2p" : ""), e.seq}];
      if (f.affected.empty()) detail::place_at(f, e);
      f.affected.push_back(rank);
      f.evidence.push_back("rank " + std::to_string(rank) + ": " + describe(e) + " in flight " + detail::seconds(age) +
                           ", its timeout " + detail::seconds(d.collective_timeout_ms / 1000.0));
      if (e.group_ranks.size() <= 1) {
        f.kind = FindingKind::Stuck;
        f.culprits = {rank};
        f.summary = "rank " + std::to_string(rank) + " is stuck in " + describe(e) + " (in flight " +
                    detail::seconds(age) + ", past its " + detail::seconds(d.collective_timeout_ms / 1000.0) +
                    " timeout), the only rank of its group: its own device work never finished it";
        f.decided_by = "alone in its group";
      } else {
        f.kind = FindingKind::Failed;
        f.summary = describe(e) + " is in flight past its timeout on " + rank_list(f.affected) +
                    " and nothing shows which rank caused it";
        f.decided_by = "undecided";
      }
    }
  }
  std::vector<Finding> out;
  for (auto& [key, f] : by_op) out.push_back(std::move(f));
  return out;
}

// Why the rank first dumped, in a few words: "timeout", "failed op", "requested by rank 1",
// "SIGUSR2", "SIGTERM", "dead peer", "uncaught exception" (later triggers in parentheses); for
// PyTorch's own dumps, which say no why, whose they are ("PyTorch nccl 2.10").
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
  // "PyTorch flight recorder (nccl), format 2.10" -> "PyTorch nccl 2.10"
  if (reason.rfind("PyTorch flight recorder", 0) == 0) {
    const size_t open = reason.find(" ("), close = reason.find(')'), format = reason.find("format ");
    std::string label = "PyTorch";
    if (open != std::string::npos && close != std::string::npos && close > open) label += " " + reason.substr(open + 2, close - open - 2);
    if (format != std::string::npos) label += " " + reason.substr(format + 7);
    return label;
  }
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
  for (auto& f : detail::find_membership_mismatches(traces)) all.push_back(std::move(f));
  std::stable_sort(all.begin(), all.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.kind) < static_cast<int>(b.kind);
  });
  // A rank behind in one group because it waits, in another group, on someone else's fault is
  // not where the trouble started: that finding goes after the one that names whom it waits on
  // (a sub-group's missing all_reduce also keeps its members from the world's next one).
  auto waits_elsewhere = [&](const Finding& f, const Finding& other) {
    if (f.kind != FindingKind::NeverJoined && f.kind != FindingKind::Stuck) return false;
    if (other.group == f.group || f.culprits.empty() || other.culprits.empty()) return false;
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
      if (&other == &f || !waits_elsewhere(f, other)) continue;
      // Each waits on the other's culprit (rank 2 left out its sub-group's all_reduce and went
      // on to the world's, where it waits for rank 3, who waits in the sub-group for rank 2):
      // the one that left the program order the others follow started it.
      if (waits_elsewhere(other, f) &&
          !(leaves_program_order(traces, other.culprits.front()) && !leaves_program_order(traces, f.culprits.front()))) {
        continue;
      }
      cause = &other;
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
  if (dx.findings.empty()) {
    for (auto& f : stuck_past_timeout(traces)) dx.findings.push_back(std::move(f));
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
