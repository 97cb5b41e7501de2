#include "analyzer/timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "analyzer/analysis_util.h"

namespace ddx::analyze {
namespace {

// Entry times are the dumping process's steady clock (ddx) or unix time (PyTorch, whose
// dump_steady_us is unix too): to unix microseconds, so ranks on different hosts line up.
int64_t unix_us(const RankDump& d, int64_t t) { return t <= 0 ? 0 : d.dump_unix_ms * 1000 - (d.dump_steady_us - t); }

}  // namespace

Timeline build_timeline(const TraceSet& traces, const Diagnosis& dx) {
  Timeline t;
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& [rank, d] : traces.dumps) {
    for (const Entry& e : d.entries) {
      if (e.enqueue_us > 0) origin = std::min(origin, unix_us(d, e.enqueue_us));
    }
  }
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;
  std::set<int> culprits;
  if (!dx.findings.empty()) {
    culprits.insert(dx.findings.front().culprits.begin(), dx.findings.front().culprits.end());
    t.verdict = std::string(to_string(dx.findings.front().kind)) + ": " + dx.findings.front().summary;
  }

  for (int rank = 0; rank < traces.world_size; ++rank) {
    RankLanes lanes;
    lanes.rank = rank;
    lanes.culprit = culprits.count(rank) > 0;
    auto found = traces.dumps.find(rank);
    if (found == traces.dumps.end()) {
      lanes.has_dump = false;
      lanes.name = "rank " + std::to_string(rank) + ": no dump";
      t.ranks.push_back(lanes);
      continue;
    }
    const RankDump& d = found->second;
    lanes.name = "rank " + std::to_string(rank) + (d.host.empty() ? "" : " (" + d.host + ")");
    lanes.dump_us = d.dump_unix_ms * 1000 - origin;
    t.end_us = std::max(t.end_us, lanes.dump_us);
    std::map<std::string, int> lane_of;
    for (size_t i = 0; i < d.entries.size(); ++i) {
      const Entry& e = d.entries[i];
      if (!lane_of.count(e.group)) {
        lane_of[e.group] = static_cast<int>(lanes.groups.size());
        lanes.groups.push_back(e.group);
      }
      if (e.enqueue_us <= 0) continue;
      Slice s;
      s.rank = rank;
      s.lane = lane_of[e.group];
      s.entry = &e;
      s.p2p = e.p2p;
      s.begin_us = unix_us(d, e.enqueue_us) - origin;
      s.end_us = e.end_us > 0 ? unix_us(d, e.end_us) - origin : 0;
      s.state = e.state;
      if (s.end_us <= 0 && e.completed()) {
        // The rank's last op on the group gets a sliver: drawn to the dump it would look like
        // the op the rank was stuck in.
        s.end_us = s.begin_us + 1000;
        s.state = "completed (end not recorded)";
        for (size_t j = i + 1; j < d.entries.size(); ++j) {
          if (d.entries[j].group == e.group && d.entries[j].enqueue_us > 0) {
            s.end_us = unix_us(d, d.entries[j].enqueue_us) - origin;
            s.state = "completed (end not recorded: drawn to the rank's next op on the group)";
            break;
          }
        }
      }
      s.stuck = !e.completed();
      if (e.in_flight()) {
        s.end_us = std::max(s.end_us, lanes.dump_us);
        s.state = e.state + ", still in flight at the dump";
      }
      if (e.failed() && s.end_us <= 0) s.end_us = lanes.dump_us;
      s.end_us = std::max(s.end_us, s.begin_us + 1);
      s.title = detail::op_name(e) + " #" + std::to_string(e.seq) + (e.in_flight() ? " (in flight)" : "") +
                (e.failed() ? " (failed)" : "");
      if (e.start_us > 0 && unix_us(d, e.start_us) - origin >= s.begin_us) s.running_us = unix_us(d, e.start_us) - origin;
      t.slices.push_back(s);
    }
    if (lanes.groups.empty()) lanes.groups.push_back("(no ops recorded)");
    t.ranks.push_back(lanes);
  }
  for (RankLanes& lanes : t.ranks) {
    if (!lanes.has_dump) lanes.dump_us = t.end_us;
  }
  return t;
}

}  // namespace ddx::analyze
