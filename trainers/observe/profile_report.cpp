#include "observe/profile_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_map>

namespace ddx::train {
namespace {

// The layer kinds, in the order a block runs them; "residual" is ddx::block's own ops.
const std::vector<std::string>& layer_kinds() {
  static const std::vector<std::string> kinds = {"embedding", "attention", "mlp", "norm", "residual", "head", "other"};
  return kinds;
}

const std::vector<std::string>& row_order() {
  static const std::vector<std::string> rows = [] {
    std::vector<std::string> r = {"data"};
    for (const auto& k : layer_kinds()) r.push_back("forward." + k);
    r.push_back("loss");
    for (const auto& k : layer_kinds()) {
      if (k == "other") r.push_back("backward.loss");
      r.push_back("backward." + k);
    }
    r.insert(r.end(), {"comm_wait", "optimizer", "other"});
    return r;
  }();
  return rows;
}

// ddx scope name -> top-level phase, and -> layer kind.
const std::map<std::string, std::string>& phase_scopes() {
  static const std::map<std::string, std::string> m = {{profile_scope::kData, "data"},
                                                       {profile_scope::kForward, "forward"},
                                                       {profile_scope::kBackward, "backward"},
                                                       {profile_scope::kCommWait, "comm_wait"},
                                                       {profile_scope::kOptimizer, "optimizer"}};
  return m;
}
const std::map<std::string, std::string>& kind_scopes() {
  static const std::map<std::string, std::string> m = {
      {"ddx::embedding", "embedding"}, {"ddx::attention", "attention"}, {"ddx::mlp", "mlp"}, {"ddx::norm", "norm"},
      {"ddx::block", "residual"},      {"ddx::head", "head"},           {"ddx::loss", "loss"}};
  return m;
}

bool is_ddx_scope(const std::string& name) { return name.rfind("ddx::", 0) == 0; }
bool is_backward_node(const std::string& name) { return name.rfind("autograd::engine::evaluate_function: ", 0) == 0; }

// What encloses an event: inherited from its parent, narrowed by its own name.
struct Context {
  bool in_step = false;
  std::string phase;  // outermost phase scope ("" inside a step: other)
  std::string kind;   // innermost layer-kind scope (forward)
  int64_t node_seq = -1;  // innermost backward node's sequence number
};

std::string row_of(const Context& c, const std::unordered_map<int64_t, std::string>& forward_kind) {
  if (c.phase.empty()) return "other";
  if (c.phase == "forward") {
    if (c.kind == "loss") return "loss";
    return "forward." + (c.kind.empty() ? std::string("other") : c.kind);
  }
  if (c.phase == "backward") {
    auto it = forward_kind.find(c.node_seq);
    if (it != forward_kind.end()) return "backward." + it->second;
    // A custom autograd function's node has no forward op under its number (its forward runs
    // without autograd): it names its layer kind with a scope inside its backward.
    return "backward." + (c.kind.empty() ? std::string("other") : c.kind);
  }
  return c.phase;
}

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

ProfileSummary summarize_profile(const std::vector<ProfileEvent>& events) {
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), 0);
  // Parents before their children: earlier start first, and the longer of two that start together.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (events[a].start_ns != events[b].start_ns) return events[a].start_ns < events[b].start_ns;
    return events[a].end_ns > events[b].end_ns;
  });
  std::vector<int64_t> self_ns(events.size());
  std::vector<Context> context(events.size());
  std::unordered_map<uint64_t, std::vector<size_t>> stacks;  // per thread: the open events
  std::unordered_map<int64_t, std::string> forward_kind;     // sequence number -> layer kind
  for (size_t i : order) {
    const ProfileEvent& e = events[i];
    self_ns[i] = e.end_ns - e.start_ns;
    auto& stack = stacks[e.thread];
    while (!stack.empty() && (events[stack.back()].end_ns <= e.start_ns || events[stack.back()].end_ns < e.end_ns)) {
      stack.pop_back();
    }
    Context c = stack.empty() ? Context{} : context[stack.back()];
    if (!stack.empty()) self_ns[stack.back()] -= e.end_ns - e.start_ns;
    if (e.name == profile_scope::kStep) {
      c = Context{};
      c.in_step = true;
    } else if (auto p = phase_scopes().find(e.name); p != phase_scopes().end()) {
      if (c.phase.empty()) c.phase = p->second;
    } else if (auto k = kind_scopes().find(e.name); k != kind_scopes().end()) {
      c.kind = k->second;
    } else if (is_backward_node(e.name)) {
      c.node_seq = e.sequence_nr;
    } else if (e.sequence_nr >= 0 && c.phase == "forward" && c.node_seq < 0) {
      forward_kind.emplace(e.sequence_nr, c.kind.empty() ? "other" : c.kind);
    }
    context[i] = c;
    stack.push_back(i);
  }

  ProfileSummary s;
  int64_t step_ns = 0;
  std::map<std::string, double> row_ns;
  struct OpTotals {
    int64_t calls = 0, self = 0;
    std::map<std::string, int64_t> by_row;
  };
  std::map<std::string, OpTotals> ops;
  for (size_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& e = events[i];
    if (e.name == profile_scope::kStep) {
      ++s.steps;
      step_ns += e.end_ns - e.start_ns;
    }
    if (!context[i].in_step) continue;
    const int64_t self = std::max<int64_t>(0, self_ns[i]);
    const std::string row = row_of(context[i], forward_kind);
    row_ns[row] += static_cast<double>(self);
    if (is_ddx_scope(e.name)) continue;
    OpTotals& op = ops[e.name];
    ++op.calls;
    op.self += self;
    op.by_row[row] += self;
  }
  const double per_step_ms = s.steps > 0 ? 1e-6 / static_cast<double>(s.steps) : 0.0;
  s.step_ms = static_cast<double>(step_ns) * per_step_ms;
  for (const auto& row : row_order()) s.phases.push_back({row, row_ns[row] * per_step_ms});
  for (const auto& [name, t] : ops) {
    auto main_row = std::max_element(t.by_row.begin(), t.by_row.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
    const double per_step = s.steps > 0 ? 1.0 / static_cast<double>(s.steps) : 0.0;
    s.ops.push_back({name, static_cast<double>(t.calls) * per_step, static_cast<double>(t.self) * per_step_ms,
                     main_row == t.by_row.end() ? "" : main_row->first});
  }
  std::stable_sort(s.ops.begin(), s.ops.end(), [](const auto& a, const auto& b) { return a.self_ms > b.self_ms; });
  return s;
}

double phase_ms(const ProfileSummary& summary, const std::string& phase) {
  double total = 0;
  for (const auto& row : summary.phases) {
    if (row.phase == phase || row.phase.rfind(phase + ".", 0) == 0) total += row.ms;
  }
  return total;
}

std::string profile_table(const ProfileSummary& s, const std::string& title, size_t top_ops) {
  std::string out = title + "\n";
  if (s.steps == 0) return out + "no step was profiled\n";
  const double step = s.step_ms > 0 ? s.step_ms : 1.0;
  auto line = [&](const std::string& label, double ms) {
    out += pad(label, 30) + fmt("%10.2f %7.1f%%\n", ms, 100.0 * ms / step);
  };
  out += pad("phase", 30) + "   ms/step   share\n";
  const std::map<std::string, std::string> labels = {{"data", "data"}, {"loss", "loss"},
                                                     {"comm_wait", "gradient comm wait"},
                                                     {"optimizer", "optimizer"},
                                                     {"other", "other (loop, metrics)"}};
  for (const std::string top : {"data", "forward", "loss", "backward", "comm_wait", "optimizer", "other"}) {
    line(labels.count(top) ? labels.at(top) : top, phase_ms(s, top));
    if (top != "forward" && top != "backward") continue;
    for (const auto& row : s.phases) {
      if (row.phase.rfind(std::string(top) + ".", 0) == 0 && row.ms > 0) line("  " + row.phase.substr(top.size() + 1), row.ms);
    }
  }
  line("step (wall)", s.step_ms);
  out += "\n" + pad("op (self time)", 52) + " calls/step   ms/step   share  phase\n";
  for (size_t i = 0; i < std::min(top_ops, s.ops.size()); ++i) {
    const auto& op = s.ops[i];
    std::string name = op.name.size() > 52 ? op.name.substr(0, 49) + "..." : op.name;
    out += pad(name, 52) + fmt("%11.1f %9.2f %6.1f%%", op.calls, op.self_ms, 100.0 * op.self_ms / step) + "  " +
           op.phase + "\n";
  }
  return out;
}

std::string profile_json(const ProfileSummary& s) {
  nlohmann::json j = {{"steps", s.steps}, {"step_ms", s.step_ms}};
  j["phases"] = nlohmann::json::array();
  for (const auto& row : s.phases) j["phases"].push_back({{"phase", row.phase}, {"ms", row.ms}});
  j["ops"] = nlohmann::json::array();
  for (const auto& op : s.ops) {
    j["ops"].push_back({{"op", op.name}, {"calls", op.calls}, {"self_ms", op.self_ms}, {"phase", op.phase}});
  }
  return j.dump(1) + "\n";
}

}  // namespace ddx::train
