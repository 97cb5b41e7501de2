// The Chrome trace event format (the JSON object form Perfetto also reads): "X" complete events
// with microsecond ts/dur, "M" metadata naming processes and threads, "i" instants.
#include <nlohmann/json.hpp>

#include "analyzer/analysis_util.h"
#include "analyzer/timeline.h"

namespace ddx::analyze {

std::string render_chrome_trace(const Timeline& t) {
  using nlohmann::ordered_json;
  ordered_json events = ordered_json::array();
  for (const RankLanes& r : t.ranks) {
    const std::string name = r.name + (r.culprit ? " CULPRIT" : "");
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r.rank}, {"args", {{"name", name}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r.rank}, {"args", {{"sort_index", r.rank}}}});
    for (size_t lane = 0; lane < r.groups.size(); ++lane) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r.rank}, {"tid", lane},
                        {"args", {{"name", "group " + r.groups[lane]}}}});
    }
    if (r.culprit || !r.has_dump) {
      events.push_back({{"ph", "i"}, {"s", "p"}, {"name", r.culprit ? "VERDICT" : "no dump"}, {"pid", r.rank}, {"tid", 0},
                        {"ts", r.dump_us}, {"args", {{"verdict", t.verdict}}}});
    }
  }
  for (const Slice& s : t.slices) {
    const Entry& e = *s.entry;
    ordered_json args = {{"group", e.group}, {"seq", e.seq}, {"state", s.state}, {"tensor", detail::tensor_text(e)},
                         {"record", e.id}};
    if (!e.call_site.empty()) args["call_site"] = e.call_site;
    if (!e.error.empty()) args["error"] = e.error;
    if (e.peer_global() >= 0) args["peer"] = e.peer_global();
    events.push_back({{"ph", "X"}, {"name", s.title}, {"cat", s.p2p ? "p2p" : "collective"}, {"pid", s.rank},
                      {"tid", s.lane}, {"ts", s.begin_us}, {"dur", s.end_us - s.begin_us}, {"args", args}});
    if (s.running_us >= 0) {
      events.push_back({{"ph", "X"}, {"name", "running"}, {"cat", "backend"}, {"pid", s.rank}, {"tid", s.lane},
                        {"ts", s.running_us}, {"dur", std::max<int64_t>(1, s.end_us - s.running_us)}});
    }
  }
  ordered_json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"tool", "ddx analyze"}, {"verdict", t.verdict}}}};
  return doc.dump() + "\n";
}

}  // namespace ddx::analyze
