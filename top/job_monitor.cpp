#include "top/job_monitor.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

#include "ddx/outliers.h"
#include "ddx/text/text.h"
#include "ddx/watchdog/watchdog.h"

namespace ddx::top {
namespace {

using nlohmann::json;

std::string seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

template <typename T>
void keep_last(std::deque<T>& d, size_t n) {
  while (d.size() > n) d.pop_front();
}

// The group's progress in a heartbeat: [enqueued, started, completed, in_flight, ...] or null.
const json* group_of(const json& hb, const std::string& group) {
  if (!hb.contains("groups") || !hb["groups"].is_object() || !hb["groups"].contains(group)) return nullptr;
  const json& g = hb["groups"][group];
  return g.is_array() && g.size() >= 4 ? &g : nullptr;
}

std::string rank_name(const RankRow& r) {
  return "rank " + std::to_string(r.rank) + (r.host.empty() ? "" : " (" + r.host + " pid " + std::to_string(r.pid) + ")");
}

std::string last_collective(const RankRow& r) {
  if (!r.in_flight_op.empty()) return "waiting in " + r.in_flight_op;
  if (!r.last_op.empty()) return "last collective " + r.last_op + " " + r.last_op_state;
  return "no collective yet";
}

}  // namespace

// One refresh: the rows from the heartbeats, then each alarm family in turn.
void JobMonitor::observe_job(const std::map<int, std::string>& heartbeats, int world_size, int64_t now_steady_ms,
                             int64_t now_unix_ms, Screen& screen) {
  screen.world_size = world_size;
  Refresh f;
  f.world_size = world_size;
  f.now_steady_ms = now_steady_ms;
  f.now_unix_ms = now_unix_ms;
  read_rows(heartbeats, f);
  f.stall_ms = options_.stall_after.count() > 0 ? options_.stall_after.count() : 2 * f.interval_ms;
  flag_stalled(f, screen);
  flag_behind(f, screen);
  flag_stragglers(f, screen);
  screen.ranks = std::move(f.rows);
}

// Each rank's row from its heartbeat, and its track (counter, step, the compute-time window,
// the tokens/s history) brought up to this refresh.
void JobMonitor::read_rows(const std::map<int, std::string>& heartbeats, Refresh& f) {
  f.stale.assign(f.world_size, false);
  for (int rank = 0; rank < f.world_size; ++rank) {
    RankRow row;
    row.rank = rank;
    auto it = heartbeats.find(rank);
    json hb = it == heartbeats.end() ? json() : json::parse(it->second, nullptr, false);
    Track& t = tracks_[rank];
    if (hb.is_object()) {
      f.docs[rank] = hb;
      row.has_heartbeat = true;
      row.host = hb.value("host", "");
      row.pid = hb.value("pid", 0);
      row.last_op = hb.value("last_op", "");
      row.last_op_state = hb.value("last_op_state", "");
      row.in_flight_op = hb.value("op", "");
      if (hb.value("interval_ms", int64_t{0}) > 0) f.interval_ms = hb["interval_ms"].get<int64_t>();
      const uint64_t counter = hb.value("n", uint64_t{0});
      if (t.polls++ == 0 || counter != t.counter) {
        t.counter = counter;
        t.counter_changed_ms = f.now_steady_ms;
      }
      row.heartbeat_age_ms = std::max<int64_t>(0, f.now_unix_ms - hb.value("unix_ms", f.now_unix_ms));
      if (hb.contains("train") && hb["train"].is_object()) read_training(hb["train"], f.now_steady_ms, t, row);
      row.tokens_history.assign(t.tokens.begin(), t.tokens.end());
    }
    f.rows.push_back(row);
  }
}

void JobMonitor::read_training(const json& tr, int64_t now_steady_ms, Track& t, RankRow& row) const {
  row.has_train = true;
  row.step = tr.value("step", int64_t{0});
  row.total_steps = tr.value("total_steps", int64_t{0});
  row.tokens_per_s = tr.value("tokens_per_s", 0.0);
  row.step_ms = tr.value("step_ms", 0.0);
  row.comm_wait_ms = tr.value("comm_wait_ms", 0.0);
  row.rss_bytes = tr.value("rss_bytes", int64_t{0});
  if (row.step != t.step) {
    t.step = row.step;
    t.step_changed_ms = now_steady_ms;
  }
  t.window.push_back({now_steady_ms, row.step, tr.value("total_step_s", 0.0), tr.value("total_comm_wait_s", 0.0)});
  keep_last(t.window, static_cast<size_t>(options_.window_polls) + 1);
  const Sample& a = t.window.front();
  const Sample& b = t.window.back();
  if (b.step > a.step) {
    row.compute_ms = 1e3 * ((b.total_step_s - b.total_comm_s) - (a.total_step_s - a.total_comm_s)) /
                     static_cast<double>(b.step - a.step);
  } else if (row.step > 0) {
    row.compute_ms = row.step_ms - row.comm_wait_ms;  // one sample: the last step's
  }
  t.tokens.push_back(row.tokens_per_s);
  keep_last(t.tokens, static_cast<size_t>(options_.history));
}

// stalled, missing and silent. A heartbeat is stale by the rank's own clock or by ours, and
// not renewed since the last refresh.
void JobMonitor::flag_stalled(Refresh& f, Screen& screen) {
  std::vector<RankRow>& rows = f.rows;
  for (RankRow& row : rows) {
    if (!row.has_heartbeat) continue;
    const Track& t = tracks_[row.rank];
    const bool renewed_now = t.polls > 1 && t.counter_changed_ms == f.now_steady_ms;
    const int64_t silent = f.now_steady_ms - t.counter_changed_ms;
    f.stale[row.rank] = !renewed_now && (row.heartbeat_age_ms > f.stall_ms || silent > f.stall_ms + f.interval_ms);
    if (!f.stale[row.rank]) ++f.fresh;
  }
  std::vector<int> missing;
  for (RankRow& row : rows) {
    if (!row.has_heartbeat) {
      missing.push_back(row.rank);
      continue;
    }
    if (!f.stale[row.rank] || f.fresh == 0) continue;
    row.stalled = true;
    ++f.stalled;
    std::vector<int> advancing;
    for (const RankRow& o : rows) {
      if (o.has_heartbeat && !f.stale[o.rank]) advancing.push_back(o.rank);
    }
    screen.alarms.push_back({"stalled", row.rank, row.host,
                             rank_name(row) + " stalled: no heartbeat for " + seconds(row.heartbeat_age_ms) +
                                 " while " + ranks_text(advancing) + " go on; " + last_collective(row) +
                                 (row.has_train ? "; at step " + std::to_string(row.step) : "")});
  }
  if (!missing.empty() && missing.size() < rows.size()) {
    for (int r : missing) {
      screen.alarms.push_back({"missing", r, "", "rank " + std::to_string(r) + " has published no heartbeat"});
    }
  }
  if (f.fresh == 0 && !f.docs.empty()) {
    int64_t youngest = -1;
    for (const RankRow& row : rows) {
      if (row.has_heartbeat && (youngest < 0 || row.heartbeat_age_ms < youngest)) youngest = row.heartbeat_age_ms;
    }
    screen.alarms.push_back({"silent", -1, "", "no rank's heartbeat has changed for " + seconds(youngest) +
                                                   ": the job ended, or the host of its store is frozen"});
  }
}

// Behind: every live rank's step stopped for longer than the stall time, and some ranks wait
// in a collective that this rank has not reached.
// A stalled rank is the culprit already; the others are only waiting for it.
void JobMonitor::flag_behind(Refresh& f, Screen& screen) {
  std::vector<RankRow>& rows = f.rows;
  bool steps_stopped = f.fresh > 0 && f.stalled == 0;
  for (const RankRow& row : rows) {
    if (!row.has_heartbeat || f.stale[row.rank]) continue;
    const Track& t = tracks_[row.rank];
    if (!row.has_train || f.now_steady_ms - t.step_changed_ms <= f.stall_ms || t.window.size() < 2) steps_stopped = false;
  }
  if (!steps_stopped) return;
  std::set<std::string> groups;
  for (const auto& [rank, hb] : f.docs) {
    if (hb.contains("groups") && hb["groups"].is_object()) {
      for (auto it = hb["groups"].begin(); it != hb["groups"].end(); ++it) groups.insert(it.key());
    }
  }
  for (const std::string& group : groups) {
    uint64_t front = 0;
    bool someone_waits = false;
    for (const auto& [rank, hb] : f.docs) {
      if (const json* g = group_of(hb, group)) front = std::max(front, g->at(0).get<uint64_t>());
    }
    std::vector<int> behind;
    for (const auto& [rank, hb] : f.docs) {
      const json* g = group_of(hb, group);
      if (!g) continue;
      if (g->at(0).get<uint64_t>() == front && g->at(3).get<int>() > 0) someone_waits = true;
      // Short of the front and not waiting in a collective of this group: busy elsewhere.
      if (g->at(0).get<uint64_t>() < front && g->at(3).get<int>() == 0 && !f.stale[rank]) behind.push_back(rank);
    }
    if (!someone_waits) continue;
    std::map<int, std::string> texts;
    for (const auto& [rank, hb] : f.docs) texts[rank] = hb.dump();
    const std::string summary = desync_summary(group, texts, f.world_size, f.now_unix_ms);
    for (int r : behind) {
      rows[r].behind = true;
      screen.alarms.push_back({"behind", r, rows[r].host,
                               rank_name(rows[r]) + " is behind: " + summary + "; " + last_collective(rows[r])});
    }
  }
}

// Stragglers, among the ranks that train and are not stalled.
void JobMonitor::flag_stragglers(Refresh& f, Screen& screen) const {
  std::vector<double> computes;
  for (const RankRow& row : f.rows) {
    if (row.compute_ms >= 0 && !row.stalled) computes.push_back(row.compute_ms);
  }
  if (computes.size() < 2) return;
  const double m = median(computes);
  for (RankRow& row : f.rows) {
    if (row.stalled || row.compute_ms < 0) continue;
    if (row.compute_ms > options_.straggler_factor * m && row.compute_ms - m >= 1.0) {
      row.straggler = true;
      screen.alarms.push_back({"straggler", row.rank, row.host,
                               rank_name(row) + " is a straggler: " + fixed(row.compute_ms, 1) +
                                   " ms per step outside collectives vs a median of " + fixed(m, 1) + " ms (" +
                                   fixed(row.compute_ms / std::max(m, 1e-9), 1) + "x > --straggler-factor " +
                                   fixed(options_.straggler_factor, 2) + ")"});
    }
  }
}

void JobMonitor::observe_nodes(Screen& screen) {
  const size_t keep = static_cast<size_t>(std::max(options_.window_polls, 1)) * 2;
  for (const NodeView& n : screen.nodes) {
    NodeMemo& memo = nodes_[n.host];
    // Power: the node's mean draw / limit against its recent high.
    double draw = 0, limit = 0;
    for (const GpuStats& g : n.gpus) {
      if (g.power_w >= 0 && g.power_limit_w > 0) {
        draw += g.power_w;
        limit += g.power_limit_w;
      }
    }
    if (limit > 0) {
      const double pct = 100 * draw / limit;
      const double high = memo.power_pct.empty() ? pct : *std::max_element(memo.power_pct.begin(), memo.power_pct.end());
      if (high >= 30 && pct < high / 2) {
        screen.alarms.push_back({"power_drop", -1, n.host,
                                 "GPU power on " + n.host + " fell to " + fixed(pct, 0) + "% of the limit from " +
                                     fixed(high, 0) + "% (a hang idles the GPUs)"});
      }
      memo.power_pct.push_back(pct);
      keep_last(memo.power_pct, keep);
    }
    auto drop = [&](std::deque<int>& past, int now, const std::string& what) {
      if (now < 0) return;
      const int high = past.empty() ? now : *std::max_element(past.begin(), past.end());
      if (now < high) {
        screen.alarms.push_back({"processes_drop", -1, n.host,
                                 what + " on " + n.host + ": " + std::to_string(now) + ", down from " + std::to_string(high)});
      }
      past.push_back(now);
      keep_last(past, keep);
    };
    drop(memo.gpu_processes, n.gpu_processes, "GPU processes");
    if (!n.problems.empty()) {
      screen.alarms.push_back({"host_problem", -1, n.host,
                               n.host + ": " + n.problems.front() +
                                   (n.problems.size() > 1 ? " (and " + std::to_string(n.problems.size() - 1) + " more)" : "")});
    }
    drop(memo.processes, n.processes, "processes of the job");
    for (const GpuStats& g : n.gpus) {
      if (g.memory_total_bytes > 0 && g.memory_used_bytes >= options_.memory_alarm * g.memory_total_bytes) {
        screen.alarms.push_back({"memory_near_limit", -1, n.host,
                                 "GPU " + std::to_string(g.index) + " on " + n.host + " uses " +
                                     fixed(100.0 * g.memory_used_bytes / g.memory_total_bytes, 1) + "% of its memory"});
      }
    }
    if (n.memory_total_bytes > 0 &&
        n.memory_total_bytes - n.memory_available_bytes >= options_.memory_alarm * n.memory_total_bytes) {
      screen.alarms.push_back({"memory_near_limit", -1, n.host,
                               "host memory on " + n.host + " is " +
                                   fixed(100.0 * (n.memory_total_bytes - n.memory_available_bytes) / n.memory_total_bytes, 1) +
                                   "% used"});
    }
  }
}

}  // namespace ddx::top
