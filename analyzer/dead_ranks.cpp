// Ranks with no usable dump. Dead when their peers saw them go: a heartbeat that stopped, a
// failed op with a connection error in a group they belong to, or (rank 0) the store they
// hosted going away. Otherwise we only know the dump is missing, and where the others wait.
#include <algorithm>
#include <map>

#include "analyzer/analysis_util.h"
#include "analyzer/diagnosis.h"

namespace ddx::analyze::detail {
namespace {

bool member(const Entry& e, int rank) {
  return std::find(e.group_ranks.begin(), e.group_ranks.end(), rank) != e.group_ranks.end();
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 160 ? line.substr(0, 160) + "..." : line;
}

}  // namespace

std::vector<Finding> find_dead_ranks(const TraceSet& traces) {
  std::vector<Finding> out;
  for (int r : traces.missing) {
    Finding f;
    f.culprits = {r};
    std::vector<std::string> evidence;
    bool seen_dying = false;  // a peer's op failed, a watchdog declared it dead, the store went
    // Where the others are blocked or failed: the oldest unfinished op of a group with r in it.
    const Entry* blocked = nullptr;
    std::vector<int> waiting;
    for (const auto& [q, d] : traces.dumps) {
      for (const Entry& e : d.entries) {
        if (e.completed() || !member(e, r)) continue;
        if (!blocked || (e.group == blocked->group && e.seq < blocked->seq)) blocked = &e;
        if (e.failed()) {
          seen_dying = true;
          evidence.push_back("rank " + std::to_string(q) + ": " + describe(e) + " failed: " + first_line(e.error));
        }
        waiting.push_back(q);
        break;
      }
    }
    std::sort(waiting.begin(), waiting.end());
    waiting.erase(std::unique(waiting.begin(), waiting.end()), waiting.end());
    f.affected = waiting;
    // What peers saw of its heartbeat.
    std::string last_seen;
    for (const auto& [q, d] : traces.dumps) {
      if (std::find(d.declared_dead.begin(), d.declared_dead.end(), r) != d.declared_dead.end()) {
        seen_dying = true;
        evidence.push_back("rank " + std::to_string(q) + "'s watchdog declared it dead (heartbeat stopped)");
      }
      auto p = d.peers.find(r);
      if (p == d.peers.end()) continue;
      if (p->second.silent_ms >= 0) {
        evidence.push_back("rank " + std::to_string(q) + " last saw its heartbeat change " +
                           seconds(p->second.silent_ms / 1000.0) + " before dumping");
      }
      for (const auto& [group, pos] : p->second.groups) {
        last_seen = "its last heartbeat: group " + group + " #" + std::to_string(pos.last_enqueued) +
                    (pos.in_flight ? " in flight" : " done") +
                    (p->second.op.empty() ? "" : " (" + p->second.op + ")");
      }
      if (!p->second.host.empty()) f.evidence.push_back("host " + p->second.host + ", pid " + std::to_string(p->second.pid));
    }
    if (r == 0) {
      std::vector<int> lost;
      for (const auto& [q, d] : traces.dumps) {
        if (d.store_failing_ms > 0) lost.push_back(q);
      }
      if (!lost.empty()) {
        seen_dying = true;
        evidence.push_back(rank_list(lost) + " lost the store rank 0 hosts");
      }
    }
    if (!last_seen.empty()) evidence.push_back(last_seen);
    if (blocked) place_at(f, *blocked);
    std::string problem = "no dump";
    for (const DumpProblem& p : traces.problems) {
      if (p.rank == r && p.kind != "missing") problem = p.kind + " dump: " + p.detail;
    }
    if (seen_dying) {
      f.kind = FindingKind::DeadRank;
      f.summary = "rank " + std::to_string(r) + " died (" + problem + ")" +
                  (blocked ? "; " + rank_list(waiting) + " lost it in " + describe(*blocked) : "");
      f.decided_by = "its peers saw it go";
    } else {
      f.kind = FindingKind::NoDump;
      // Every rank that was alive when the others failed writes a dump: one that wrote none
      // crashed or was killed first, which makes it the prime suspect.
      f.summary = "rank " + std::to_string(r) + " left " +
                  (problem == "no dump" ? "no dump: it crashed or was killed before it could write one, the prime suspect"
                                        : "an unusable dump") +
                  (blocked ? "; " + rank_list(waiting) + " " + verb_for(waiting, "wait") + " for it in " + describe(*blocked) : "");
      f.decided_by = problem;
    }
    f.evidence.insert(f.evidence.end(), evidence.begin(), evidence.end());
    out.push_back(f);
  }
  return out;
}

}  // namespace ddx::analyze::detail
