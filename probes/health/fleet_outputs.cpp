// What the fleet view writes (fleet.h): the verdict line and console summary, the drain list, a
// Markdown or HTML table with one row per node, and JSON.
#include <map>
#include <set>
#include <sstream>

#include "ddx/text/svg_plot.h"
#include "ddx/text/text.h"
#include "health/fleet.h"

namespace ddx::health {
namespace {

using nlohmann::json;

std::string figure_text(double value) { return printf_text("%.4g", value); }

std::map<State, int> state_counts(const FleetView& view) {
  std::map<State, int> counts;
  for (const FleetNode& node : view.nodes) ++counts[node.state];
  return counts;
}

std::vector<std::string> drained(const FleetView& view) {
  std::vector<std::string> names;
  for (const FleetNode& node : view.nodes) {
    if (node.drain) names.push_back(node.name);
  }
  return names;
}

// The table's columns: every judged figure any node has (key, label for people), in the order the
// reports measured them.
std::vector<std::pair<std::string, std::string>> figure_columns(const FleetView& view) {
  std::vector<std::pair<std::string, std::string>> columns;
  std::set<std::string> seen;
  for (const FleetNode& node : view.nodes) {
    for (const Metric& metric : judged_metrics(node.report)) {
      if (seen.insert(metric_key(metric)).second) columns.emplace_back(metric_key(metric), metric_label(metric));
    }
  }
  return columns;
}

// key -> value of a node's judged figures, and the keys found low.
std::map<std::string, double> figures_of(const FleetNode& node) {
  std::map<std::string, double> figures;
  for (const Metric& metric : judged_metrics(node.report)) figures[metric_key(metric)] = metric.value;
  return figures;
}

std::set<std::string> low_keys(const FleetNode& node) {
  std::set<std::string> keys;
  for (const FigureJudgement& j : node.low) keys.insert(metric_key(j.metric));
  return keys;
}

std::string markdown_cell(std::string text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

}  // namespace

std::string fleet_verdict_line(const FleetView& view) {
  auto counts = state_counts(view);
  int nodes = 0, files = 0;
  for (const FleetNode& node : view.nodes) (node.readable ? nodes : files) += 1;
  const std::vector<std::string> to_drain = drained(view);
  return printf_text("ddx health fleet: %s: %d node%s%s: %d OK, %d WARN, %d CRITICAL, %d UNKNOWN; %s",
                     to_string(fleet_state(view)), nodes, nodes == 1 ? "" : "s",
                     files ? printf_text(" and %d unreadable file%s", files, files == 1 ? "" : "s").c_str() : "",
                     counts[State::Ok], counts[State::Warn], counts[State::Critical], counts[State::Unknown],
                     to_drain.empty() ? "nothing to drain"
                                      : printf_text("drain %zu: %s", to_drain.size(), join(to_drain).c_str()).c_str());
}

std::string format_fleet_console(const FleetView& view) {
  std::ostringstream out;
  std::map<std::string, int> models;
  int nodes = 0, files = 0;
  for (const FleetNode& node : view.nodes) {
    if (node.readable) ++models[node.report.device_model.empty() ? "(no device model)" : node.report.device_model];
    (node.readable ? nodes : files) += 1;
  }
  out << printf_text("ddx health fleet: %d node%s (the newest report of each", nodes, nodes == 1 ? "" : "s");
  if (view.files_older) out << printf_text("; %d older left out", view.files_older);
  if (view.files_not_reports) out << printf_text("; %d baseline or fleet file%s passed over", view.files_not_reports,
                                                 view.files_not_reports == 1 ? "" : "s");
  out << ")" << (files ? printf_text(", %d unreadable file%s", files, files == 1 ? "" : "s") : "")
      << ", judged against " << view.judged_against << "\n";
  for (const auto& [model, count] : models) out << printf_text("  %s: %d node%s\n", model.c_str(), count, count == 1 ? "" : "s");
  // The named nodes: low figures with the numbers that condemn them, then every node not OK.
  for (const FleetNode& node : view.nodes) {
    for (const FigureJudgement& j : node.low) {
      out << printf_text("%-9s %s: %s %s\n", "LOW", node.name.c_str(), metric_label(j.metric).c_str(),
                         judgement_row(j, view.reference).value.c_str());
    }
  }
  for (const FleetNode& node : view.nodes) {
    if (node.state == State::Ok || (node.state == State::Warn && !node.low.empty() && node.own == State::Ok)) continue;
    out << printf_text("%-9s %s: %s\n", to_string(node.state), node.name.c_str(), node.reason.c_str());
  }
  for (const std::string& note : view.notes) out << "note: " << note << "\n";
  out << fleet_verdict_line(view) << "\n";
  return out.str();
}

std::string fleet_drain_list(const FleetView& view) {
  std::string text;
  for (const FleetNode& node : view.nodes) {
    if (node.drain) text += node.name + " " + node.reason + "\n";
  }
  return text;
}

std::string fleet_markdown(const FleetView& view) {
  const auto columns = figure_columns(view);
  std::ostringstream md;
  md << "# ddx health fleet\n\n" << fleet_verdict_line(view) << "\n\nJudged against " << view.judged_against
     << "; a low figure is **bold** with its threshold.\n\n| node | state | device model |";
  for (const auto& [key, label] : columns) md << " " << markdown_cell(label) << " |";
  md << " reason |\n|---|---|---|";
  for (size_t i = 0; i < columns.size(); ++i) md << "---:|";
  md << "---|\n";
  for (const FleetNode& node : view.nodes) {
    const auto figures = figures_of(node);
    const auto low = low_keys(node);
    md << "| " << markdown_cell(node.name) << " | " << to_string(node.state) << " | "
       << markdown_cell(node.report.device_model) << " |";
    for (const auto& [key, label] : columns) {
      const auto figure = figures.find(key);
      md << " ";
      if (figure != figures.end() && low.count(key)) {
        for (const FigureJudgement& j : node.low) {
          if (metric_key(j.metric) == key) md << "**" << figure_text(j.metric.value) << "** (< " << figure_text(j.threshold) << ")";
        }
      } else if (figure != figures.end()) {
        md << figure_text(figure->second);
      }
      md << " |";
    }
    md << " " << markdown_cell(node.reason) << " |\n";
  }
  if (!view.notes.empty()) {
    md << "\n";
    for (const std::string& note : view.notes) md << "- " << markdown_cell(note) << "\n";
  }
  return md.str();
}

std::string fleet_html(const FleetView& view) {
  const auto columns = figure_columns(view);
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ddx health fleet</title>\n<style>\n"
       "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
       "th,td{border:1px solid #ccc;padding:3px 8px}td.num{text-align:right}"
       ".OK{background:#dfd}.WARN{background:#ffd}.CRITICAL{background:#fcc}.UNKNOWN{background:#ddd}"
       "td.low{background:#fcc;font-weight:bold}\n</style></head><body>\n<h1>ddx health fleet</h1>\n<p>"
    << svg::escape(fleet_verdict_line(view)) << "</p>\n<p>Judged against " << svg::escape(view.judged_against)
    << "; a low figure is marked with its threshold.</p>\n<table>\n<tr><th>node</th><th>state</th><th>device model</th>";
  for (const auto& [key, label] : columns) h << "<th title=\"" << svg::escape(key) << "\">" << svg::escape(label) << "</th>";
  h << "<th>reason</th></tr>\n";
  for (const FleetNode& node : view.nodes) {
    const auto figures = figures_of(node);
    const auto low = low_keys(node);
    h << "<tr><td>" << svg::escape(node.name) << "</td><td class=\"" << to_string(node.state) << "\">"
      << to_string(node.state) << "</td><td>" << svg::escape(node.report.device_model) << "</td>";
    for (const auto& [key, label] : columns) {
      const auto figure = figures.find(key);
      if (figure == figures.end()) {
        h << "<td></td>";
        continue;
      }
      std::string threshold;
      for (const FigureJudgement& j : node.low) {
        if (metric_key(j.metric) == key) threshold = " (&lt; " + figure_text(j.threshold) + ")";
      }
      h << "<td class=\"num" << (low.count(key) ? " low" : "") << "\">" << figure_text(figure->second) << threshold << "</td>";
    }
    h << "<td>" << svg::escape(node.reason) << "</td></tr>\n";
  }
  h << "</table>\n";
  if (!view.notes.empty()) {
    h << "<ul>\n";
    for (const std::string& note : view.notes) h << "<li>" << svg::escape(note) << "</li>\n";
    h << "</ul>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

json fleet_to_json(const FleetView& view) {
  json nodes = json::array();
  for (const FleetNode& node : view.nodes) {
    json figures = json::object();
    for (const auto& [key, value] : figures_of(node)) figures[key] = value;
    json low = json::array();
    for (const FigureJudgement& j : node.low) {
      low.push_back({{"metric", metric_key(j.metric)}, {"value", j.metric.value}, {"median", j.median},
                     {"threshold", j.threshold}});
    }
    json n = {{"node", node.name}, {"file", node.file}, {"readable", node.readable}, {"state", to_string(node.state)},
              {"own_state", to_string(node.own)}, {"figures", figures}, {"low", low}, {"reason", node.reason},
              {"drain", node.drain}};
    if (node.readable) {
      n["device_model"] = node.report.device_model;
      n["started"] = node.report.started;
      n["level"] = node.report.level;
    }
    nodes.push_back(n);
  }
  return {{"format", "ddx-health-fleet"}, {"state", to_string(fleet_state(view))}, {"exit_code", fleet_exit_code(view)},
          {"verdict", fleet_verdict_line(view)}, {"judged_against", view.judged_against}, {"nodes", nodes},
          {"notes", view.notes}};
}

}  // namespace ddx::health
