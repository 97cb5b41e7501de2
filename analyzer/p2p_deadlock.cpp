// Point-to-point deadlocks: rank a is blocked in a send to b while b is blocked in a send to a
// (or both in a receive from each other). Neither op can ever be matched. Who broke the
// protocol is the rank whose first op at this call site differs from what it did at the same
// call site on an earlier step; when both or neither changed, both are named.
#include <map>
#include <set>

#include "analyzer/analysis_util.h"
#include "analyzer/diagnosis.h"

namespace ddx::analyze::detail {
namespace {

const Entry* first_blocked_p2p(const RankDump& d) {
  for (const Entry* e : blocked_ops(d)) {
    if (e->p2p && e->peer_global() >= 0) return e;
  }
  return nullptr;
}

// The op this rank did first, to the same peer, at the previous occurrence of the call site.
const Entry* same_step_before(const RankDump& d, const Entry& now) {
  if (now.call_site.empty()) return nullptr;
  const std::string site = normalize_call_site(now.call_site);
  const Entry* found = nullptr;
  std::string run_site;  // raw call site of the run being scanned
  for (const Entry& e : d.entries) {
    if (e.id >= now.id) break;
    if (!e.p2p || e.peer_global() != now.peer_global()) continue;
    if (e.call_site == run_site) continue;  // not the first op of its run
    run_site = e.call_site;
    if (e.call_site != now.call_site && normalize_call_site(e.call_site) == site) found = &e;
  }
  return found;
}

}  // namespace

std::vector<Finding> find_p2p_deadlocks(const TraceSet& traces) {
  std::vector<Finding> out;
  std::set<std::pair<int, int>> reported;
  for (const auto& [a, da] : traces.dumps) {
    const Entry* ea = first_blocked_p2p(da);
    if (!ea) continue;
    const int b = ea->peer_global();
    auto it = traces.dumps.find(b);
    if (it == traces.dumps.end()) continue;
    const Entry* eb = first_blocked_p2p(it->second);
    if (!eb || eb->peer_global() != a || eb->op != ea->op) continue;
    if (!reported.insert({std::min(a, b), std::max(a, b)}).second) continue;

    Finding f;
    f.kind = FindingKind::P2PDeadlock;
    f.group = ea->group;
    f.p2p = true;
    const RankDump& db = it->second;
    const Entry* before_a = same_step_before(da, *ea);
    const Entry* before_b = same_step_before(db, *eb);
    const bool a_changed = before_a && before_a->op != ea->op;
    const bool b_changed = before_b && before_b->op != eb->op;
    auto history = [](int rank, const Entry* before, const Entry& now) {
      return "rank " + std::to_string(rank) + " started '" + before->call_site + "' with " +
             before->op + " and '" + now.call_site + "' with " + now.op;
    };
    if (a_changed != b_changed && before_a && before_b) {
      const int culprit = a_changed ? a : b;
      f.culprits = {culprit};
      f.affected = {a_changed ? b : a};
      f.decided_by = history(culprit, a_changed ? before_a : before_b, a_changed ? *ea : *eb) +
                     "; its peer kept the same order";
    } else {
      f.culprits = {std::min(a, b), std::max(a, b)};
      f.decided_by = "both ranks wait on each other and nothing shows which one changed order";
    }
    const Entry& ec = f.culprits[0] == a ? *ea : *eb;
    const RankDump& dc = f.culprits[0] == a ? da : db;
    f.op = ec.op;
    f.seq = ec.seq;
    f.call_site = ec.call_site;
    const bool sending = ea->op == "send";
    f.summary = "p2p deadlock: ranks " + std::to_string(std::min(a, b)) + " and " +
                std::to_string(std::max(a, b)) + " are both " + (sending ? "sending to" : "receiving from") +
                " each other; " + rank_list(f.culprits) + " broke the order with " + describe(ec) +
                " (blocked " + seconds(dc.seconds_before_dump(ec.enqueue_us)) + ")";
    f.evidence.push_back("rank " + std::to_string(a) + ": blocked in " + describe(*ea) + " for " +
                         seconds(da.seconds_before_dump(ea->enqueue_us)));
    f.evidence.push_back("rank " + std::to_string(b) + ": blocked in " + describe(*eb) + " for " +
                         seconds(db.seconds_before_dump(eb->enqueue_us)));
    out.push_back(f);
  }
  return out;
}

}  // namespace ddx::analyze::detail
