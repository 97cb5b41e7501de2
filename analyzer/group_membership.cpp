// Groups whose membership the ranks disagree on: each rank's dump says who is in each of its
// groups (PyTorch's pg_config, ddx's group_ranks). Two ranks that both belong to a group by
// their own account but list different members built it differently (new_group called with other
// rank lists on different ranks): a collective on it can never complete. Views that share no
// rank are different groups that happen to share a name (split_group), not a disagreement.
#include <algorithm>
#include <map>
#include <set>

#include "analyzer/analysis_util.h"

namespace ddx::analyze::detail {
namespace {

std::string members_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

bool overlap(const std::vector<int>& a, const std::vector<int>& b) {
  return std::any_of(a.begin(), a.end(), [&](int r) { return std::find(b.begin(), b.end(), r) != b.end(); });
}

}  // namespace

std::vector<Finding> find_membership_mismatches(const TraceSet& traces) {
  std::map<std::string, std::map<std::vector<int>, std::vector<int>>> views;  // group -> members -> holders
  for (const auto& [rank, d] : traces.dumps) {
    for (const auto& [name, position] : d.groups) {
      if (!position.ranks.empty()) views[name][position.ranks].push_back(rank);
    }
  }
  std::vector<Finding> out;
  for (const auto& [group, by_members] : views) {
    if (by_members.size() < 2) continue;
    std::set<int> culprits, affected;
    std::vector<std::string> evidence;
    for (const auto& [members, holders] : by_members) {
      for (const auto& [other, other_holders] : by_members) {
        if (members == other || !overlap(members, other)) continue;
        // The view fewer ranks hold is the odd one; a tie names both sides.
        if (holders.size() <= other_holders.size()) culprits.insert(holders.begin(), holders.end());
        if (holders.size() >= other_holders.size()) affected.insert(holders.begin(), holders.end());
      }
    }
    if (culprits.empty()) continue;
    for (const auto& [members, holders] : by_members) {
      evidence.push_back(rank_list(holders) + " " + verb_for(holders, "see") + " group " + group +
                         " as ranks " + members_text(members));
    }
    Finding f;
    f.kind = FindingKind::MembershipMismatch;
    f.group = group;
    f.culprits.assign(culprits.begin(), culprits.end());
    for (int r : affected) {
      if (!culprits.count(r)) f.affected.push_back(r);
    }
    // The op the culprit issued on the group last, if any: where the job stopped.
    auto d = traces.dumps.find(f.culprits.front());
    if (d != traces.dumps.end()) {
      if (const Entry* e = last_collective(d->second, group)) place_at(f, *e);
    }
    const bool tie = f.affected.empty();
    f.summary = rank_list(f.culprits) + " " + verb_for(f.culprits, "disagree") +
                (tie ? "" : " with " + rank_list(f.affected)) +
                " on who is in group " + group + ": a collective on it cannot complete";
    f.decided_by = tie ? "no majority: every side named" : "majority of the ranks that know the group";
    f.evidence = evidence;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace ddx::analyze::detail
