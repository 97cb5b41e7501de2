// The one place a `ddx health` run is judged and written out (health_check.h): the overall state,
// the verdict line, the drain reason, the table, the JSON and node_exporter's textfile format.
#include "health/health_check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>
#include <stdexcept>

#include "ddx/text/text.h"

namespace ddx::health {
namespace {

using nlohmann::json;

// How bad a state is for the overall verdict. UNKNOWN ranks above WARN (ddx could not look, so
// nobody knows the node is fine) and below CRITICAL (a known fault outweighs a blind spot).
int severity(State state) {
  switch (state) {
    case State::Ok: return 0;
    case State::Warn: return 1;
    case State::Unknown: return 2;
    case State::Critical: return 3;
  }
  return 2;
}

State state_from_string(const std::string& text, const std::string& where) {
  for (State s : {State::Ok, State::Warn, State::Critical, State::Unknown}) {
    if (text == to_string(s)) return s;
  }
  throw std::runtime_error(where + ": unknown state \"" + text + "\" (expected OK, WARN, CRITICAL or UNKNOWN)");
}

// A drain reason or a verdict is one line: SLURM shows it in `sinfo -R`.
std::string one_line(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

std::string seconds_text(double seconds) { return printf_text("%.1f s", seconds); }

// --- report_from_json: every key read through one place, so an error names the key ---

std::string key_path(const std::string& where, const std::string& key) { return where.empty() ? key : where + "." + key; }

const json& member(const json& object, const std::string& key, const std::string& where) {
  if (!object.is_object()) throw std::runtime_error((where.empty() ? "report" : where) + ": expected an object");
  auto it = object.find(key);
  if (it == object.end()) throw std::runtime_error(key_path(where, key) + ": missing");
  return *it;
}

template <typename T>
T required(const json& object, const std::string& key, const std::string& where, json::value_t kind, const char* kind_name) {
  const json& value = member(object, key, where);
  const bool numeric = kind == json::value_t::number_float &&
                       (value.is_number_float() || value.is_number_integer() || value.is_number_unsigned());
  const bool integer = kind == json::value_t::number_integer && (value.is_number_integer() || value.is_number_unsigned());
  if (!(numeric || integer || value.type() == kind)) {
    throw std::runtime_error(key_path(where, key) + ": expected " + kind_name + ", got " + value.type_name());
  }
  return value.get<T>();
}

template <typename T>
T optional(const json& object, const std::string& key, const std::string& where, json::value_t kind, const char* kind_name, T fallback) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return fallback;
  return required<T>(object, key, where, kind, kind_name);
}

std::string opt_string(const json& o, const std::string& key, const std::string& where) {
  return optional<std::string>(o, key, where, json::value_t::string, "a string", "");
}

Metric metric_from_json(const json& j, const std::string& where) {
  Metric m;
  m.name = required<std::string>(j, "name", where, json::value_t::string, "a string");
  m.value = required<double>(j, "value", where, json::value_t::number_float, "a number");
  m.judged = optional<bool>(j, "judged", where, json::value_t::boolean, "true or false", false);
  if (j.contains("labels")) {
    const json& labels = j.at("labels");
    if (!labels.is_object()) throw std::runtime_error(key_path(where, "labels") + ": expected an object");
    for (const auto& [k, v] : labels.items()) {
      if (!v.is_string()) throw std::runtime_error(key_path(where, "labels." + k) + ": expected a string");
      m.labels[k] = v.get<std::string>();
    }
  }
  return m;
}

Check check_from_json(const json& j, const std::string& where) {
  Check c;
  c.name = required<std::string>(j, "name", where, json::value_t::string, "a string");
  c.state = state_from_string(required<std::string>(j, "state", where, json::value_t::string, "a string"), key_path(where, "state"));
  c.skipped = optional<bool>(j, "skipped", where, json::value_t::boolean, "true or false", false);
  c.value = opt_string(j, "value", where);
  c.remediation = opt_string(j, "remediation", where);
  c.reason = opt_string(j, "reason", where);
  if (j.contains("metrics")) {
    const json& metrics = j.at("metrics");
    if (!metrics.is_array()) throw std::runtime_error(key_path(where, "metrics") + ": expected an array");
    for (size_t i = 0; i < metrics.size(); ++i) {
      c.metrics.push_back(metric_from_json(metrics[i], key_path(where, "metrics[" + std::to_string(i) + "]")));
    }
  }
  return c;
}

// --- Prometheus text format (https://prometheus.io/docs/instrumenting/exposition_formats/) ---

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; label names the same without ':'. A name a check made
// up wrongly is mended rather than dropped, so the figure still reaches the dashboard.
std::string legal_name(const std::string& name, bool colon_allowed) {
  std::string out;
  for (char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (colon_allowed && c == ':');
    out += ok ? c : '_';
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return printf_text("%.17g", value);
}

// Labels in a fixed order: host first, then the rest by name. A figure's own "host" label is
// kept as "exported_host" (Prometheus' convention) so it cannot clash with the node's.
using Labels = std::vector<std::pair<std::string, std::string>>;

Labels with_host(const std::string& host, const std::map<std::string, std::string>& labels) {
  Labels out{{"host", host}};
  std::set<std::string> seen{"host"};
  for (const auto& [name, value] : labels) {
    std::string legal = legal_name(name, false);
    if (legal == "host") legal = "exported_host";
    if (legal.rfind("__", 0) == 0) legal = "x" + legal;  // names starting "__" are reserved
    if (seen.insert(legal).second) out.emplace_back(legal, value);
  }
  return out;
}

std::string label_text(const Labels& labels) {
  std::string out;
  for (const auto& [name, value] : labels) out += (out.empty() ? "" : ",") + name + "=\"" + escape_label_value(value) + "\"";
  return "{" + out + "}";
}

// Samples grouped by metric family in the order families first appear: the text format wants a
// family's lines together under one HELP and one TYPE, and node_exporter rejects a file that
// repeats a series, so a repeated one is dropped (the first kept).
class TextfileWriter {
 public:
  void add(const std::string& name, const std::string& help, const Labels& labels, double value) {
    auto it = std::find_if(families_.begin(), families_.end(), [&](const Family& f) { return f.name == name; });
    if (it == families_.end()) {
      families_.push_back({name, help, {}, {}});
      it = families_.end() - 1;
    }
    const std::string labels_text = label_text(labels);
    if (!it->series.insert(labels_text).second) return;
    it->samples.push_back(name + labels_text + " " + sample_value(value));
  }
  std::string text() const {
    std::ostringstream out;
    for (const auto& f : families_) {
      out << "# HELP " << f.name << " " << escape_help(f.help) << "\n# TYPE " << f.name << " gauge\n";
      for (const auto& s : f.samples) out << s << "\n";
    }
    return out.str();
  }

 private:
  struct Family {
    std::string name, help;
    std::set<std::string> series;
    std::vector<std::string> samples;
  };
  std::vector<Family> families_;
};

// "2025-01-31T12:00:00Z" (or with fractional seconds) as unix seconds; NaN when not that shape.
double unix_seconds(const std::string& iso) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(iso.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return NAN;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double fraction = 0;
  const char* rest = iso.c_str() + consumed;
  if (*rest == '.') {
    char* end = nullptr;
    fraction = std::strtod(rest, &end);
    rest = end;
  }
  if (std::string(rest) != "Z" && std::string(rest) != "+00:00") return NAN;  // ddx writes UTC
  return static_cast<double>(timegm(&tm)) + fraction;
}

}  // namespace

const char* to_string(State state) {
  switch (state) {
    case State::Ok: return "OK";
    case State::Warn: return "WARN";
    case State::Critical: return "CRITICAL";
    case State::Unknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

State overall(const Report& report) {
  bool any_ran = false;
  State worst = State::Ok;
  for (const auto& c : report.checks) {
    if (c.skipped) continue;
    any_ran = true;
    if (severity(c.state) > severity(worst)) worst = c.state;
  }
  return any_ran ? worst : State::Unknown;
}

int exit_code(const Report& report) { return static_cast<int>(overall(report)); }

std::string verdict_line(const Report& report) {
  const State state = overall(report);
  std::map<State, int> counts;
  int skipped = 0;
  const Check* first_worst = nullptr;
  int worst_count = 0;
  for (const auto& c : report.checks) {
    if (c.skipped) {
      ++skipped;
      continue;
    }
    ++counts[c.state];
    if (c.state == state && state != State::Ok) {
      if (!first_worst) first_worst = &c;
      ++worst_count;
    }
  }
  std::string what;
  if (first_worst) {
    what = first_worst->name + (first_worst->value.empty() ? "" : " " + first_worst->value);
    if (worst_count > 1) what += " (+" + std::to_string(worst_count - 1) + " more " + to_string(state) + ")";
    what += "; ";
  } else if (state == State::Unknown) {
    what = "nothing was checked; ";
  }
  std::vector<std::string> tally;
  for (State s : {State::Ok, State::Warn, State::Critical, State::Unknown}) {
    if (counts[s] > 0) tally.push_back(std::to_string(counts[s]) + " " + to_string(s));
  }
  if (skipped > 0) tally.push_back(std::to_string(skipped) + " skipped");
  std::string line = std::string("ddx health: ") + to_string(state) + " on " + report.host + " (level " +
                     std::to_string(report.level) + ", " + seconds_text(report.seconds) + "): " + what +
                     std::to_string(report.checks.size()) + " checks" + (tally.empty() ? "" : ": " + join(tally));
  return one_line(line);
}

std::string drain_reason(const Report& report, size_t max_chars) {
  std::vector<std::string> reasons;
  for (const auto& c : report.checks) {
    if (c.skipped || c.state != State::Critical) continue;
    const std::string reason = one_line(c.reason.empty() ? c.name : c.reason);
    if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(reason);
  }
  if (reasons.empty()) return "";
  const std::string prefix = kDrainPrefix;
  const std::string separator = "; ";
  auto more = [&](size_t left) { return left == 0 ? std::string() : "+" + std::to_string(left) + " more"; };

  std::string out = prefix;
  size_t taken = 0;
  for (; taken < reasons.size(); ++taken) {
    const std::string sep = taken == 0 ? "" : separator;
    const size_t left_after = reasons.size() - taken - 1;
    const std::string tail = left_after == 0 ? "" : separator + more(left_after);
    if ((out + sep + reasons[taken] + tail).size() > max_chars) break;
    out += sep + reasons[taken];
  }
  if (taken == reasons.size()) return out;
  if (taken > 0) return out + separator + more(reasons.size() - taken);
  // Not even the first reason fits whole: a cut first reason names more than "+N more" alone.
  const std::string tail = reasons.size() > 1 ? separator + more(reasons.size() - 1) : "";
  if (prefix.size() + tail.size() + 4 > max_chars) return out.substr(0, std::min(out.size(), max_chars));
  const size_t room = max_chars - prefix.size() - tail.size() - 3;
  return prefix + reasons[0].substr(0, room) + "..." + tail;
}

std::string format_table(const Report& report) {
  size_t name_width = 5;
  for (const auto& c : report.checks) name_width = std::max(name_width, c.name.size());
  const int width = static_cast<int>(name_width);
  std::ostringstream out;
  out << printf_text("%-*s  %-8s  ", width, "check", "state") << "value\n";
  for (const auto& c : report.checks) {
    out << printf_text("%-*s  %-8s  ", width, c.name.c_str(), c.skipped ? "SKIP" : to_string(c.state)) << c.value << "\n";
    if (!c.skipped && c.state != State::Ok && !c.remediation.empty()) {
      out << std::string(name_width + 12, ' ') << "fix: " << c.remediation << "\n";
    }
  }
  return out.str();
}

json to_json(const Report& report) {
  json checks = json::array();
  for (const auto& c : report.checks) {
    json metrics = json::array();
    for (const auto& m : c.metrics) {
      metrics.push_back({{"name", m.name}, {"value", m.value}, {"labels", m.labels}, {"judged", m.judged}});
    }
    checks.push_back({{"name", c.name},
                      {"state", to_string(c.state)},
                      {"skipped", c.skipped},
                      {"value", c.value},
                      {"remediation", c.remediation},
                      {"reason", c.reason},
                      {"metrics", metrics}});
  }
  return {{"host", report.host},
          {"level", report.level},
          {"device_model", report.device_model},
          {"ddx_version", report.ddx_version},
          {"started", report.started},
          {"seconds", report.seconds},
          {"state", to_string(overall(report))},
          {"exit_code", exit_code(report)},
          {"verdict", verdict_line(report)},
          {"drain_reason", drain_reason(report)},
          {"checks", checks}};
}

Report report_from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error(std::string("report: expected an object, got ") + j.type_name());
  Report r;
  r.host = required<std::string>(j, "host", "", json::value_t::string, "a string");
  r.level = required<int>(j, "level", "", json::value_t::number_integer, "an integer");
  r.device_model = opt_string(j, "device_model", "");
  r.ddx_version = opt_string(j, "ddx_version", "");
  r.started = opt_string(j, "started", "");
  r.seconds = optional<double>(j, "seconds", "", json::value_t::number_float, "a number", 0.0);
  const json& checks = member(j, "checks", "");
  if (!checks.is_array()) throw std::runtime_error(std::string("checks: expected an array, got ") + checks.type_name());
  for (size_t i = 0; i < checks.size(); ++i) r.checks.push_back(check_from_json(checks[i], "checks[" + std::to_string(i) + "]"));
  return r;
}

std::string to_prometheus(const Report& report) {
  TextfileWriter out;
  const std::string level = std::to_string(report.level);
  for (const auto& c : report.checks) {
    const Labels labels = with_host(report.host, {{"check", c.name}});
    out.add("ddx_health_check_state",
            "State of one ddx health check: 0 OK, 1 WARN, 2 CRITICAL, 3 UNKNOWN (see ddx_health_check_skipped).",
            labels, static_cast<double>(c.state));
    out.add("ddx_health_check_skipped", "1 when the check had nothing to check on this node (its state counts for nothing).",
            labels, c.skipped ? 1 : 0);
  }
  const Labels node = with_host(report.host, {{"level", level}});
  out.add("ddx_health_state", "Overall state of the ddx health run: 0 OK, 1 WARN, 2 CRITICAL, 3 UNKNOWN.", node,
          static_cast<double>(overall(report)));
  out.add("ddx_health_seconds", "Wall time of the ddx health run.", node, report.seconds);
  const double started = unix_seconds(report.started);
  if (!std::isnan(started)) out.add("ddx_health_start_time_seconds", "When the ddx health run started, unix seconds.", node, started);
  out.add("ddx_health_info", "The ddx health run's device model and ddx version, as labels.",
          with_host(report.host, {{"level", level}, {"device_model", report.device_model}, {"ddx_version", report.ddx_version}}), 1);
  for (const auto& c : report.checks) {
    for (const auto& m : c.metrics) {
      out.add(legal_name(m.name, true), "A ddx health figure; its labels and unit: docs/health.md, Prometheus.",
              with_host(report.host, m.labels), m.value);
    }
  }
  return out.text();
}

}  // namespace ddx::health
