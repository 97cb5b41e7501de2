// A rank others wait for in a send or receive while it has nothing in flight at all: it stopped
// (a hung or stalled process, a rank that skipped its side of the exchange). Chains resolve to
// their end: in a pipeline, stage 0 waits on stage 1 which waits on the stopped stage 2; only
// stage 2 has no op of its own in flight, so only it is named.
#include <map>
#include <set>

#include "analyzer/analysis_util.h"

namespace ddx::analyze::detail {

std::vector<Finding> find_stopped_peers(const TraceSet& traces) {
  const auto places = pipeline_places(traces);
  auto who = [&](int rank) {
    auto it = places.find(rank);
    return "rank " + std::to_string(rank) + (it == places.end() ? "" : " (" + stage_text(it->second) + ")");
  };
  // For each idle peer, the first blocked op of every rank waiting on it (a receive before a
  // send: sends are often buffered, a receive is what a rank cannot go on without).
  std::map<int, std::map<int, const Entry*>> waits;
  for (const auto& [a, d] : traces.dumps) {
    std::map<int, const Entry*> first;
    for (const Entry* e : blocked_ops(d)) {
      const int b = e->peer_global();
      if (!e->p2p || b < 0 || b == a) continue;
      const Entry*& slot = first[b];
      if (!slot || (slot->op == "send" && e->op == "recv")) slot = e;
    }
    for (const auto& [b, e] : first) {
      auto peer = traces.dumps.find(b);
      if (peer != traces.dumps.end() && blocked_ops(peer->second).empty()) waits[b][a] = e;
    }
  }
  std::vector<Finding> out;
  for (const auto& [b, waiting] : waits) {
    const RankDump& db = traces.dumps.at(b);
    Finding f;
    f.kind = FindingKind::StoppedPeer;
    f.culprits = {b};
    f.p2p = true;
    const Entry& first = *waiting.begin()->second;
    f.group = first.group;
    f.seq = first.seq;
    f.op = first.op;
    f.call_site = first.call_site;
    std::string waits_text;
    for (const auto& [a, e] : waiting) {
      f.affected.push_back(a);
      const std::string stage_wait = pipeline_wait(*e);
      waits_text += std::string(waits_text.empty() ? "" : "; ") + who(a) + " waits in " + describe(*e) +
                    (stage_wait.empty() ? "" : " for " + stage_wait);
      f.evidence.push_back("rank " + std::to_string(a) + ": blocked in " + describe(*e) + " for " +
                           seconds(traces.dumps.at(a).seconds_before_dump(e->enqueue_us)));
    }
    const Entry* last = nullptr;
    for (const Entry& e : db.entries) {
      if (e.completed()) last = &e;
    }
    const std::string idle = last ? ", idle " + seconds(db.seconds_before_dump(last->end_us)) + " since " +
                                        describe(*last)
                                  : "";
    f.summary = who(b) + " stopped: " + waits_text + ", and rank " + std::to_string(b) + " has no op in flight" + idle;
    f.decided_by = "its dump shows nothing in flight while " + rank_list(f.affected) + " " +
                   verb_for(f.affected, "wait") + " on it";
    f.evidence.push_back("rank " + std::to_string(b) + ": nothing in flight" + idle);
    out.push_back(f);
  }
  return out;
}

}  // namespace ddx::analyze::detail
