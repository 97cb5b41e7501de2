// What the watchdog says about an op and about its peers: the heartbeat each rank publishes and
// the one-glance desync summary built from the peers' heartbeats (RAS-style grouping: "ranks
// 0,1,3 at #4, rank 2 at #3"; no rank is taken as the reference).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "ddx/text/text.h"
#include "ddx/watchdog/watchdog.h"

namespace ddx {
namespace {

using nlohmann::json;



std::string seconds_text(int64_t ms) {
  std::ostringstream out;
  out.precision(ms < 10000 ? 2 : 3);
  out << ms / 1000.0 << " s";
  return out.str();
}

}  // namespace

std::string describe_op(const OpRecord& r) {
  std::ostringstream out;
  out << to_string(r.op);
  if (!r.reduce_op.empty()) out << "(" << r.reduce_op << ")";
  out << (r.p2p ? " p2p#" : " #") << r.seq << " on group " << r.group << " (";
  if (!r.dtype.empty()) out << r.dtype << " " << shape_text(r.in_shape);
  if (r.peer >= 0) out << (r.p2p ? ", peer " : ", root ") << r.peer;
  if (!r.call_site.empty()) out << ", at '" << r.call_site << "'";
  out << ")";
  return out.str();
}

std::string heartbeat_payload(uint64_t counter, const DumpContext& me, const RecorderSnapshot& s,
                              const std::vector<OpRecord>& in_flight, const std::optional<OpRecord>& newest,
                              const std::optional<TrainProgress>& train, std::chrono::milliseconds interval) {
  json groups = json::object();
  for (const GroupProgress& g : s.groups) {
    groups[g.group] = {g.last_enqueued, g.last_started, g.last_completed,
                       g.in_flight, g.last_enqueued_p2p, g.last_completed_p2p};
  }
  const int64_t idle_ms = s.last_event_us ? (steady_now_us() - s.last_event_us) / 1000 : -1;
  json doc = {{"n", counter},         {"rank", me.rank},      {"world_size", me.world_size},
              {"host", me.host},      {"pid", me.pid},        {"unix_ms", unix_now_ms()},
              {"interval_ms", interval.count()}, {"idle_ms", idle_ms}, {"groups", std::move(groups)},
              {"op", in_flight.empty() ? std::string() : describe_op(in_flight.front())},
              {"last_op", newest ? describe_op(*newest) : std::string()},
              {"last_op_state", newest ? to_string(newest->state) : ""}};
  if (train) {
    doc["train"] = {{"step", train->step},
                    {"total_steps", train->total_steps},
                    {"tokens_per_s", train->tokens_per_s},
                    {"step_ms", train->step_ms},
                    {"comm_wait_ms", train->comm_wait_ms},
                    {"total_step_s", train->total_step_s},
                    {"total_comm_wait_s", train->total_comm_wait_s},
                    {"rss_bytes", train->rss_bytes},
                    {"unix_ms", train->unix_ms}};
  }
  return doc.dump();
}

std::string desync_summary(const std::string& group, const std::map<int, std::string>& heartbeats,
                           int world_size, int64_t now_unix_ms, std::vector<int>* behind) {
  // Position of each rank in `group`: (enqueued, in flight?) -> ranks.
  struct Position {
    uint64_t enqueued = 0;
    bool in_flight = false;
    bool unfinished = false;  // enqueued but neither in flight nor completed: it failed
    bool operator<(const Position& o) const {
      if (enqueued != o.enqueued) return enqueued > o.enqueued;
      if (in_flight != o.in_flight) return in_flight > o.in_flight;
      return unfinished > o.unfinished;
    }
  };
  std::map<Position, std::vector<int>> positions;
  std::map<Position, int64_t> max_idle;
  std::vector<int> silent;
  std::map<std::string, std::vector<int>> stale_by_host;  // host -> ranks whose heartbeat stopped
  int64_t stale_ms = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    auto it = heartbeats.find(rank);
    json hb = it == heartbeats.end() ? json() : json::parse(it->second, nullptr, false);
    if (!hb.is_object() || !hb.contains("groups")) {
      silent.push_back(rank);
      continue;
    }
    const json& groups = hb["groups"];
    if (!groups.contains(group)) continue;  // not a member
    const json& g = groups[group];
    Position p;
    p.enqueued = g.at(0).get<uint64_t>();
    p.in_flight = g.at(3).get<int>() > 0;
    p.unfinished = !p.in_flight && g.at(2).get<uint64_t>() < p.enqueued;
    positions[p].push_back(rank);
    max_idle[p] = std::max(max_idle[p], hb.value("idle_ms", int64_t{0}));
    const int64_t sent = hb.value("unix_ms", int64_t{0});
    const int64_t age = sent > 0 ? now_unix_ms - sent : 0;
    if (age > std::max<int64_t>(5000, 3 * hb.value("interval_ms", int64_t{0}))) {
      stale_by_host[hb.value("host", std::string("?"))].push_back(rank);
      stale_ms = std::max(stale_ms, age);
    }
  }
  if (positions.empty()) return "";
  std::ostringstream out;
  out << "group " << group << ": ";
  const uint64_t front = positions.begin()->first.enqueued;
  bool first = true;
  for (const auto& [p, ranks] : positions) {
    out << (first ? "" : "; ") << ranks_text(ranks) << " at #" << p.enqueued;
    if (p.in_flight) {
      out << " (in flight)";
    } else if (p.unfinished) {
      out << " (failed)";
    } else {
      out << " (done, idle " << seconds_text(max_idle[p]) << ")";
    }
    if (p.enqueued < front) {
      out << " <- behind";
      if (behind) behind->insert(behind->end(), ranks.begin(), ranks.end());
    }
    first = false;
  }
  if (!silent.empty()) out << "; " << ranks_text(silent) << ": no heartbeat";
  for (const auto& [host, ranks] : stale_by_host) {
    out << "; " << ranks_text(ranks) << " (" << host << ") silent for " << seconds_text(stale_ms)
        << (ranks.size() == 1 ? ": its" : ": their") << " host may be down, or the process"
        << (ranks.size() == 1 ? "" : "es") << " stopped";
  }
  return out.str();
}

}  // namespace ddx
