// Baselines of `ddx health` (baseline.h): per device model and metric key, the median and MAD of
// the figures many reports gave, saved as JSON; a figure is judged low against them by the rule
// of every ddx probe (ddx/outliers.h low_threshold), with the node probes' margins.
#include "health/baseline.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

#include "ddx/errors/errors.h"
#include "ddx/text/text.h"

namespace ddx::health {
namespace {

using nlohmann::json;

// What a baseline file says it is, so that a report, a fleet summary or another tool's JSON given
// as --baseline is refused in words, and a baseline lying in a folder of reports is recognised.
constexpr const char* kBaselineFormat = "ddx-health-baseline";
constexpr int kBaselineVersion = 1;

// Prometheus' escaping of a label value (backslash, double quote, newline).
std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}


double number_at(const json& figure, const char* field, const std::string& where) {
  if (!figure.contains(field) || !figure[field].is_number()) {
    throw std::runtime_error(where + ": \"" + field + "\" is missing or not a number");
  }
  return figure[field].get<double>();
}

}  // namespace

std::string metric_key(const Metric& metric) {
  std::string key = metric.name;
  std::string labels;
  for (const auto& [name, value] : metric.labels) {
    if (name == "host") continue;  // the same figure on every node
    labels += (labels.empty() ? "" : ",") + name + "=\"" + escape_label(value) + "\"";
  }
  return labels.empty() ? key : key + "{" + labels + "}";
}

std::string metric_label(const Metric& metric) {
  std::string label = starts_with(metric.name, "ddx_health_") ? metric.name.substr(11) : metric.name;
  for (const auto& [name, value] : metric.labels) {
    if (name != "host") label += " " + value;
  }
  return label;
}

std::vector<Metric> judged_metrics(const Report& report) {
  std::vector<Metric> judged;
  std::set<std::string> seen;
  for (const Check& check : report.checks) {
    for (const Metric& metric : check.metrics) {
      if (metric.judged && seen.insert(metric_key(metric)).second) judged.push_back(metric);
    }
  }
  return judged;
}

OutlierRule rule_for(const Metric& metric) {
  OutlierRule rule;
  bool on_gpu = false;
  for (const auto& [name, value] : metric.labels) {
    on_gpu = on_gpu || starts_with(value, "gpu") || starts_with(value, "cuda") || value == "nccl";
  }
  rule.margin = on_gpu ? 0.10 : 0.25;
  return rule;
}

Baseline build_baseline(const std::vector<Report>& reports) {
  // model -> key -> one figure per report
  std::map<std::string, std::map<std::string, std::vector<double>>> figures;
  for (const Report& report : reports) {
    for (const Metric& metric : judged_metrics(report)) figures[report.device_model][metric_key(metric)].push_back(metric.value);
  }
  Baseline baseline;
  for (const auto& [model, by_key] : figures) {
    for (const auto& [key, values] : by_key) {
      baseline.models[model][key] = {median(values), median_absolute_deviation(values), static_cast<int>(values.size())};
    }
  }
  return baseline;
}

json baseline_to_json(const Baseline& baseline) {
  json models = json::object();
  for (const auto& [model, by_key] : baseline.models) {
    json figures = json::object();
    for (const auto& [key, f] : by_key) figures[key] = {{"median", f.median}, {"mad", f.mad}, {"count", f.count}};
    models[model] = figures;
  }
  return {{"format", kBaselineFormat}, {"version", kBaselineVersion}, {"models", models}};
}

Baseline baseline_from_json(const json& j) {
  if (!j.is_object() || j.value("format", "") != kBaselineFormat) {
    throw std::runtime_error(std::string("not a ddx health baseline (no \"format\": \"") + kBaselineFormat +
                             "\"; write one with ddx health fleet --save-baseline)");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kBaselineVersion) {
    throw std::runtime_error("baseline \"version\" " + (j.contains("version") ? j["version"].dump() : std::string("missing")) +
                             ": this ddx reads version " + std::to_string(kBaselineVersion));
  }
  if (!j.contains("models") || !j["models"].is_object()) throw std::runtime_error("\"models\" is missing or not an object");
  Baseline baseline;
  for (const auto& [model, by_key] : j["models"].items()) {
    if (!by_key.is_object()) throw std::runtime_error("model '" + model + "': not an object of figures");
    for (const auto& [key, figure] : by_key.items()) {
      const std::string where = "model '" + model + "' figure '" + key + "'";
      if (!figure.is_object()) throw std::runtime_error(where + ": not an object {median, mad, count}");
      BaselineFigure f;
      f.median = number_at(figure, "median", where);
      f.mad = number_at(figure, "mad", where);
      f.count = static_cast<int>(number_at(figure, "count", where));
      if (f.median < 0 || f.mad < 0 || f.count < 1) {
        throw std::runtime_error(where + ": median and mad must be 0 or more and count 1 or more");
      }
      baseline.models[model][key] = f;
    }
  }
  return baseline;
}

Baseline read_baseline_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--baseline " + path + ": cannot read it: " + std::strerror(errno));
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw UsageError("--baseline " + path + ": not JSON (write one with ddx health fleet --save-baseline)");
  Baseline baseline;
  try {
    baseline = baseline_from_json(j);
  } catch (const std::runtime_error& e) {
    throw UsageError("--baseline " + path + ": " + e.what());
  }
  // One that judges nothing would pass every node: a request that tests nothing.
  if (baseline.models.empty()) throw UsageError("--baseline " + path + ": no figures in it: it judges nothing");
  return baseline;
}

Check judgement_row(const FigureJudgement& j, const std::string& reference) {
  Check row;
  row.name = metric_key(j.metric);
  row.state = j.low ? State::Warn : State::Ok;
  row.value = printf_text("%.4g %s %s median %.4g (threshold %.4g)", j.metric.value, j.low ? "below" : "against",
                          reference.c_str(), j.median, j.threshold);
  if (j.low) {
    row.remediation = "measure it again on an idle node; if it stays low, drain the node and look at its clocks, "
                      "throttling and errors (ddx health --level 3)";
    row.reason = printf_text("low %s %.3g < %.3g", metric_label(j.metric).c_str(), j.metric.value, j.threshold);
  }
  return row;
}

std::vector<FigureJudgement> judge_figures(const Report& report, const Baseline& baseline,
                                           std::vector<std::string>* unknown_keys,
                                           const std::optional<OutlierRule>& rule) {
  std::vector<FigureJudgement> judged;
  const auto model = baseline.models.find(report.device_model);
  for (const Metric& metric : judged_metrics(report)) {
    const std::string key = metric_key(metric);
    const BaselineFigure* known = nullptr;
    if (model != baseline.models.end()) {
      const auto figure = model->second.find(key);
      if (figure != model->second.end()) known = &figure->second;
    }
    if (!known) {
      if (unknown_keys) unknown_keys->push_back(key);
      continue;
    }
    FigureJudgement j;
    j.metric = metric;
    j.median = known->median;
    j.threshold = low_threshold(known->median, known->mad, rule ? *rule : rule_for(metric));
    j.low = known->median > 0 && metric.value < j.threshold;
    judged.push_back(j);
  }
  return judged;
}

std::vector<Check> judge_against_baseline(const Report& report, const Baseline& baseline,
                                          const std::optional<OutlierRule>& rule) {
  std::vector<std::string> unknown;
  std::vector<Check> rows;
  for (const FigureJudgement& j : judge_figures(report, baseline, &unknown, rule)) {
    rows.push_back(judgement_row(j, "the baseline's"));
  }
  for (const std::string& key : unknown) {
    Check row;
    row.name = key;
    row.skipped = true;
    row.value = baseline.models.count(report.device_model)
                    ? "not in the baseline: not judged"
                    : "not in the baseline (it has no figures for '" + report.device_model + "'): not judged";
    rows.push_back(row);
  }
  return rows;
}

}  // namespace ddx::health
