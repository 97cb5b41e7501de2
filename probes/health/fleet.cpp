// The fleet view's reading and judging (fleet.h): reports from files and folders, the newest per
// host, each node against its peers of the same device model (ddx/outliers.h low_outliers) or a
// saved baseline (baseline.h judge_figures), then its state, reason and whether it is drained.
#include "health/fleet.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ddx/outliers.h"
#include "ddx/text/text.h"

namespace ddx::health {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// JSON that ddx health fleet writes itself (a saved baseline, a --json summary): found in a folder
// of reports it is passed over, not listed as a bad report.
bool is_fleet_output(const json& j) {
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string()) return false;
  const std::string format = j["format"].get<std::string>();
  return format == "ddx-health-baseline" || format == "ddx-health-fleet";
}

// Every *.json under `folder` (its subfolders too), sorted so runs list files the same way.
std::vector<std::string> json_files_under(const std::string& folder, std::vector<UnreadableFile>& unreadable) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && it->path().extension() == ".json") files.push_back(it->path().string());
  }
  if (ec) unreadable.push_back({folder, "cannot list the folder: " + ec.message()});
  std::sort(files.begin(), files.end());
  return files;
}

struct ReadReport {
  Report report;
  std::string file;
};

// One file: a report, or why not (`found_in_folder`: a ddx fleet output there is passed over).
void read_file(const std::string& path, bool found_in_folder, std::vector<ReadReport>& reports, FleetInput& input) {
  std::ifstream in(path);
  if (!in) {
    input.unreadable.push_back({path, std::string("cannot read it: ") + std::strerror(errno)});
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    input.unreadable.push_back({path, text.str().empty() ? "empty file" : "not JSON"});
    return;
  }
  if (is_fleet_output(j)) {
    if (found_in_folder) {
      ++input.not_reports;
    } else {
      input.unreadable.push_back({path, "a " + j["format"].get<std::string>() + " file, not a node's report" +
                                            (j["format"] == "ddx-health-baseline" ? " (give it with --baseline)" : "")});
    }
    return;
  }
  try {
    Report report = report_from_json(j);
    if (report.host.empty()) throw std::runtime_error("its \"host\" is empty");
    reports.push_back({std::move(report), path});
  } catch (const std::exception& e) {
    input.unreadable.push_back({path, std::string("not a ddx health report: ") + e.what()});
  }
}

// The rows the fleet adds to a node's report for its low figures, so that its state and drain
// reason follow the same rules as a node's own run (overall(), drain_reason()).
std::vector<Check> low_rows(const FleetNode& node, const std::string& reference, State as) {
  std::vector<Check> rows;
  for (const FigureJudgement& j : node.low) {
    Check row = judgement_row(j, reference);
    row.name = "fleet " + row.name;  // beside the check that measured it, in the same report
    row.state = as;
    rows.push_back(row);
  }
  return rows;
}

// "first check: its value" (+N more) of the checks in `state`.
std::string checks_in(const Report& report, State state) {
  std::vector<std::string> found;
  for (const Check& check : report.checks) {
    if (!check.skipped && check.state == state) found.push_back(check.name + ": " + check.value);
  }
  if (found.empty()) return "";
  return found.front() + (found.size() > 1 ? printf_text(" (+%zu more)", found.size() - 1) : "");
}

void settle(FleetNode& node, const std::string& reference) {
  if (!node.readable) {
    node.own = node.state = State::Unknown;
    return;
  }
  node.own = overall(node.report);
  Report judged = node.report;
  for (Check& row : low_rows(node, reference, State::Warn)) judged.checks.push_back(row);
  node.state = overall(judged);
  // UNKNOWN never drains (ddx could not check the node: fail open), whatever else it found.
  node.drain = node.own == State::Critical || (!node.low.empty() && node.own != State::Unknown);
  if (node.drain) {
    // drain_reason() reads CRITICAL rows: the low figures are given as such so that one rule
    // writes (and shortens) every reason.
    Report reasons = node.report;
    for (Check& row : low_rows(node, reference, State::Critical)) reasons.checks.push_back(row);
    node.reason = drain_reason(reasons);
  } else if (node.own == State::Unknown) {
    const std::string unknown = checks_in(node.report, State::Unknown);
    node.reason = unknown.empty() ? "its run checked nothing (every check skipped)" : "its run could not check " + unknown;
  } else if (node.own == State::Warn) {
    node.reason = "its run warned: " + checks_in(node.report, State::Warn);
  }
}

void judge_against_peers(FleetView& view) {
  std::map<std::string, std::vector<FleetNode*>> by_model;
  for (FleetNode& node : view.nodes) {
    if (node.readable) by_model[node.report.device_model].push_back(&node);
  }
  for (const auto& [model, nodes] : by_model) {
    // key -> each node that has the figure, with it
    std::map<std::string, std::vector<std::pair<FleetNode*, Metric>>> figures;
    for (FleetNode* node : nodes) {
      for (const Metric& metric : judged_metrics(node->report)) figures[metric_key(metric)].push_back({node, metric});
    }
    if (figures.empty()) continue;
    if (static_cast<int>(nodes.size()) < kMinFleetPeers) {
      view.notes.push_back(printf_text("%s: %zu node%s, too few to judge against each other (%d or more, or --baseline)",
                                       model.c_str(), nodes.size(), nodes.size() == 1 ? "" : "s", kMinFleetPeers));
      continue;
    }
    for (const auto& [key, holders] : figures) {
      if (static_cast<int>(holders.size()) < kMinFleetPeers) {
        view.notes.push_back(printf_text("%s: %s on %zu node%s only: not judged", model.c_str(),
                                         metric_label(holders.front().second).c_str(), holders.size(),
                                         holders.size() == 1 ? "" : "s"));
        continue;
      }
      std::vector<double> values;
      for (const auto& holder : holders) values.push_back(holder.second.value);
      for (const Outlier& o : low_outliers(values, rule_for(holders.front().second))) {
        holders[o.index].first->low.push_back({holders[o.index].second, o.peer_median, o.threshold, true});
      }
    }
  }
}

void judge_against_saved(FleetView& view, const Baseline& baseline) {
  std::map<std::string, int> models_missing;               // model -> nodes
  std::map<std::string, std::set<std::string>> keys_missing;  // model -> figure labels
  for (FleetNode& node : view.nodes) {
    if (!node.readable) continue;
    const std::string& model = node.report.device_model;
    if (!baseline.models.count(model)) {
      if (!judged_metrics(node.report).empty()) ++models_missing[model];
      continue;
    }
    std::vector<std::string> unknown;
    for (const FigureJudgement& j : judge_figures(node.report, baseline, &unknown)) {
      if (j.low) node.low.push_back(j);
    }
    keys_missing[model].insert(unknown.begin(), unknown.end());
  }
  for (const auto& [model, count] : models_missing) {
    view.notes.push_back(printf_text("%s: %d node%s, a model the baseline does not know: not judged", model.c_str(), count,
                                     count == 1 ? "" : "s"));
  }
  for (const auto& [model, keys] : keys_missing) {
    if (keys.empty()) continue;
    view.notes.push_back(model + ": not in the baseline, not judged: " +
                         join(std::vector<std::string>(keys.begin(), keys.end())));
  }
}

}  // namespace

FleetInput read_fleet(const std::vector<std::string>& paths) {
  FleetInput input;
  std::vector<ReadReport> reports;
  for (const std::string& path : paths) {
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
      input.unreadable.push_back({path, ec && ec != std::errc::no_such_file_or_directory ? "cannot reach it: " + ec.message()
                                                                                          : "no such file or folder"});
    } else if (fs::is_directory(status)) {
      for (const std::string& file : json_files_under(path, input.unreadable)) read_file(file, true, reports, input);
    } else {
      read_file(path, false, reports, input);
    }
  }
  // The newest report of each host counts: a node's earlier runs in the same folder are history.
  std::map<std::string, ReadReport> newest;
  for (const ReadReport& r : reports) input.every_report.push_back(r.report);
  for (ReadReport& r : reports) {
    auto [it, inserted] = newest.emplace(r.report.host, r);
    if (inserted) continue;
    ++input.older;
    if (r.report.started >= it->second.report.started) it->second = std::move(r);
  }
  for (auto& [host, r] : newest) {
    input.reports.push_back(std::move(r.report));
    input.files.push_back(r.file);
  }
  return input;
}

FleetView judge_fleet(const FleetInput& input, const Baseline* baseline, const std::string& baseline_name) {
  FleetView view;
  view.files_older = input.older;
  view.files_not_reports = input.not_reports;
  for (size_t i = 0; i < input.reports.size(); ++i) {
    FleetNode node;
    node.name = input.reports[i].host;
    node.file = input.files[i];
    node.readable = true;
    node.report = input.reports[i];
    view.nodes.push_back(node);
  }
  for (const UnreadableFile& u : input.unreadable) {
    FleetNode node;
    node.name = node.file = u.path;
    node.reason = u.why;
    view.nodes.push_back(node);
  }
  if (baseline) {
    view.judged_against = "the baseline " + baseline_name;
    view.reference = "the baseline's";
    judge_against_saved(view, *baseline);
  } else {
    view.judged_against = "their peers of the same device model";
    view.reference = "its peers'";
    judge_against_peers(view);
  }
  for (FleetNode& node : view.nodes) settle(node, view.reference);
  std::stable_sort(view.nodes.begin(), view.nodes.end(),
                   [](const FleetNode& a, const FleetNode& b) { return a.name < b.name; });
  return view;
}

State fleet_state(const FleetView& view) {
  // One row per node in a report of the fleet: overall() orders the states as for one node.
  Report fleet;
  for (const FleetNode& node : view.nodes) {
    Check row;
    row.name = node.name;
    row.state = node.state;
    fleet.checks.push_back(row);
  }
  return overall(fleet);
}

int fleet_exit_code(const FleetView& view) { return static_cast<int>(fleet_state(view)); }

}  // namespace ddx::health
