#include "top/top_render.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <cstdio>
#include <ctime>

namespace ddx::top {
namespace {

using nlohmann::json;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string bytes_text(int64_t b) {
  if (b < 0) return "-";
  const double gib = b / (1024.0 * 1024 * 1024);
  return gib >= 1 ? fmt("%.1fG", gib) : fmt("%.0fM", b / (1024.0 * 1024));
}

std::string clock_text(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S UTC", &tm);
  return buf;
}

// Left-aligned columns of ASCII cells; the last column may hold wide characters.
std::vector<std::string> table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    for (size_t i = 0; i + 1 < r.size(); ++i) {
      if (width.size() <= i) width.resize(i + 1, 0);
      width[i] = std::max(width[i], r[i].size());
    }
  }
  std::vector<std::string> out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> node_cells(const NodeView& n) {
  double util = 0, draw = 0, limit = 0;
  int64_t used = 0, total = 0;
  int util_n = 0;
  for (const GpuStats& g : n.gpus) {
    if (g.util_pct >= 0) util += g.util_pct, ++util_n;
    if (g.power_w >= 0 && g.power_limit_w > 0) draw += g.power_w, limit += g.power_limit_w;
    if (g.memory_total_bytes > 0) used += g.memory_used_bytes, total += g.memory_total_bytes;
  }
  const bool gpus = !n.gpus.empty();
  return {n.host,
          n.source,
          gpus ? std::to_string(n.gpus.size()) : "-",
          util_n ? fmt("%.0f%%", util / util_n) : "-",
          limit > 0 ? fmt("%.0f%%", 100 * draw / limit) + " (" + fmt("%.0f", draw) + "/" + fmt("%.0fW", limit) + ")" : "-",
          total > 0 ? fmt("%.0f%%", 100.0 * used / total) : "-",
          n.gpu_processes >= 0 ? std::to_string(n.gpu_processes) : "-",
          n.load1 >= 0 ? fmt("%.2f", n.load1) + "/" + std::to_string(n.cpus) : "-",
          n.memory_total_bytes > 0
              ? fmt("%.0f%%", 100.0 * (n.memory_total_bytes - n.memory_available_bytes) / n.memory_total_bytes)
              : "-",
          n.ranks > 0 ? (n.processes >= 0 ? std::to_string(n.processes) : "?") + "/" + std::to_string(n.ranks) : "-",
          n.ranks > 0 ? bytes_text(n.rss_bytes) : "-"};
}

double sort_value(const RankRow& r, SortKey key) {
  switch (key) {
    case SortKey::Rank: return r.rank;
    case SortKey::Step: return static_cast<double>(r.step);
    case SortKey::TokensPerS: return r.tokens_per_s;
    case SortKey::ComputeMs: return r.compute_ms;
    case SortKey::HeartbeatAge: return static_cast<double>(r.heartbeat_age_ms);
  }
  return r.rank;
}

std::string flags(const RankRow& r) {
  if (!r.has_heartbeat) return "NO HEARTBEAT";
  if (r.stalled) return "STALLED";
  if (r.behind) return "BEHIND";
  if (r.straggler) return "STRAGGLER";
  return "";
}

}  // namespace

const char* sort_name(SortKey key) {
  switch (key) {
    case SortKey::Rank: return "rank";
    case SortKey::Step: return "step";
    case SortKey::TokensPerS: return "tok/s";
    case SortKey::ComputeMs: return "compute";
    case SortKey::HeartbeatAge: return "hb age";
  }
  return "rank";
}

SortKey next_sort(SortKey key) {
  return key == SortKey::HeartbeatAge ? SortKey::Rank : static_cast<SortKey>(static_cast<int>(key) + 1);
}

std::string sparkline(const std::vector<double>& values, double max, size_t width) {
  static const char* bars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string out;
  const size_t start = values.size() > width ? values.size() - width : 0;
  for (size_t i = start; i < values.size(); ++i) {
    int level = max > 0 && values[i] > 0 ? static_cast<int>(values[i] / max * 7.999) : 0;
    out += bars[std::clamp(level, 0, 7)];
  }
  return out;
}

std::vector<Line> render_screen(const Screen& s, SortKey sort, bool descending) {
  std::vector<Line> out;
  std::string title = "ddx top  " + clock_text(s.unix_ms) + "  refresh " + std::to_string(s.poll);
  if (!s.job.empty()) title += "  job " + s.job + "  " + std::to_string(s.world_size) + " ranks";
  out.push_back({title, Style::Title});
  if (!s.job_error.empty()) out.push_back({"store: " + s.job_error, Style::Alarm});

  if (!s.nodes.empty()) {
    out.push_back({"", Style::Normal});
    std::vector<std::vector<std::string>> rows = {
        {"NODE", "SOURCE", "GPUS", "UTIL", "POWER", "GPU MEM", "GPU PROCS", "LOAD/CPUS", "MEM", "RANKS", "RSS"}};
    for (const NodeView& n : s.nodes) rows.push_back(node_cells(n));
    const auto lines = table(rows);
    for (size_t i = 0; i < lines.size(); ++i) out.push_back({lines[i], i == 0 ? Style::Header : Style::Normal});
    for (const NodeView& n : s.nodes) {
      if (!n.gpu_note.empty() && n.source != "ssh") out.push_back({"  " + n.host + ": " + n.gpu_note, Style::Note});
      for (const std::string& p : n.problems) out.push_back({"  " + n.host + ": " + p, Style::Alarm});
    }
  }

  if (!s.ranks.empty()) {
    // Grouped by host in the NODE table's order (a job of srun -m cyclic puts ranks 0 and 1
    // on different hosts), then by the chosen key within each host.
    std::map<std::string, size_t> host_order;
    for (const NodeView& n : s.nodes) host_order.emplace(n.host, host_order.size());
    auto host_position = [&](const RankRow* r) {
      auto it = host_order.find(r->host);
      return it == host_order.end() ? host_order.size() : it->second;
    };
    std::vector<const RankRow*> order;
    for (const RankRow& r : s.ranks) order.push_back(&r);
    std::stable_sort(order.begin(), order.end(), [&](const RankRow* a, const RankRow* b) {
      if (host_position(a) != host_position(b)) return host_position(a) < host_position(b);
      const double x = sort_value(*a, sort), y = sort_value(*b, sort);
      return descending ? x > y : x < y;
    });
    double max_tokens = 0;
    for (const RankRow& r : s.ranks) {
      for (double v : r.tokens_history) max_tokens = std::max(max_tokens, v);
    }
    out.push_back({"", Style::Normal});
    std::vector<std::vector<std::string>> rows = {{"RANK", "HOST", "PID", "STEP", "TOK/S", "STEP MS", "WAIT MS",
                                                   "COMPUTE MS", "HB AGE", "LAST COLLECTIVE", "STATE", "FLAG",
                                                   "TOK/S TREND"}};
    for (const RankRow* r : order) {
      const std::string op = !r->in_flight_op.empty() ? r->in_flight_op : r->last_op;
      rows.push_back({std::to_string(r->rank), r->host, r->pid ? std::to_string(r->pid) : "-",
                      r->has_train ? std::to_string(r->step) + (r->total_steps ? "/" + std::to_string(r->total_steps) : "") : "-",
                      r->has_train ? fmt("%.0f", r->tokens_per_s) : "-", r->has_train ? fmt("%.1f", r->step_ms) : "-",
                      r->has_train ? fmt("%.1f", r->comm_wait_ms) : "-",
                      r->compute_ms >= 0 ? fmt("%.1f", r->compute_ms) : "-",
                      r->heartbeat_age_ms >= 0 ? fmt("%.1fs", r->heartbeat_age_ms / 1000.0) : "-",
                      op.empty() ? "-" : op.substr(0, op.find(" (")),
                      !r->in_flight_op.empty() ? "in flight" : (r->last_op_state.empty() ? "-" : r->last_op_state),
                      flags(*r).empty() ? "-" : flags(*r), sparkline(r->tokens_history, max_tokens, 24)});
    }
    const auto lines = table(rows);
    for (size_t i = 0; i < lines.size(); ++i) {
      const bool flagged = i > 0 && !flags(*order[i - 1]).empty();
      out.push_back({lines[i], i == 0 ? Style::Header : flagged ? Style::Flagged : Style::Normal});
    }
  }

  out.push_back({"", Style::Normal});
  if (s.alarms.empty()) {
    out.push_back({"alarms: none", Style::Note});
  } else {
    out.push_back({"alarms:", Style::Alarm});
    for (const Alarm& a : s.alarms) out.push_back({"  [" + a.kind + "] " + a.message, Style::Alarm});
  }
  return out;
}

std::string screen_json(const Screen& s) {
  json nodes = json::array();
  for (const NodeView& n : s.nodes) {
    json gpus = json::array();
    for (const GpuStats& g : n.gpus) {
      gpus.push_back({{"index", g.index}, {"name", g.name}, {"util_pct", g.util_pct}, {"power_w", g.power_w},
                      {"power_limit_w", g.power_limit_w}, {"memory_used_bytes", g.memory_used_bytes},
                      {"memory_total_bytes", g.memory_total_bytes}, {"processes", g.processes}});
    }
    nodes.push_back({{"host", n.host}, {"source", n.source}, {"gpus", gpus}, {"gpu_note", n.gpu_note},
                     {"gpu_processes", n.gpu_processes}, {"load1", n.load1}, {"cpus", n.cpus},
                     {"memory_total_bytes", n.memory_total_bytes}, {"memory_available_bytes", n.memory_available_bytes},
                     {"ranks", n.ranks}, {"processes", n.processes}, {"rss_bytes", n.rss_bytes},
                     {"problems", n.problems}});
  }
  json ranks = json::array();
  for (const RankRow& r : s.ranks) {
    ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"pid", r.pid}, {"heartbeat", r.has_heartbeat},
                     {"step", r.step}, {"total_steps", r.total_steps}, {"tokens_per_s", r.tokens_per_s},
                     {"step_ms", r.step_ms}, {"comm_wait_ms", r.comm_wait_ms}, {"compute_ms", r.compute_ms},
                     {"heartbeat_age_ms", r.heartbeat_age_ms}, {"last_op", r.last_op},
                     {"last_op_state", r.last_op_state}, {"in_flight_op", r.in_flight_op},
                     {"stalled", r.stalled}, {"behind", r.behind}, {"straggler", r.straggler}});
  }
  json alarms = json::array();
  for (const Alarm& a : s.alarms) {
    alarms.push_back({{"kind", a.kind}, {"rank", a.rank >= 0 ? json(a.rank) : json()}, {"host", a.host},
                      {"message", a.message}});
  }
  json doc = {{"unix_ms", s.unix_ms}, {"poll", s.poll}, {"job", s.job}, {"job_error", s.job_error},
              {"world_size", s.world_size}, {"nodes", nodes}, {"ranks", ranks}, {"alarms", alarms}};
  return doc.dump();
}

}  // namespace ddx::top
