// A run against an earlier run of the same cluster (`ddx validate --baseline old/validate.json`):
// the weekly re-validation after a driver or firmware update. Figures are keyed by host and
// local rank, not rank number, so a job laid out differently still meets its own GPUs. Each
// figure carries the jitter its own run saw, so a figure that is noisy on this machine (a CPU
// collective at a latency-bound size scatters by ±50 % between iterations) is not failed for
// moving within its noise, while a steady one is held to the margin.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "ddx/errors/errors.h"
#include "ddx/outliers.h"
#include "ddx/text/text.h"
#include "harness/validate/validate.h"

namespace ddx::validate {
namespace {

using nlohmann::json;

// compute.json / memory.json: every rank's figure (its best trial) per metric; its jitter is how
// far the median trial fell below the best.
void add_rank_probe(const std::string& path, std::map<std::string, Figure>& figures) {
  const json j = read_json(path);
  if (!j.is_object() || !j.contains("ranks")) return;
  const std::string probe = j.value("probe", "");
  std::map<std::string, std::string> labels;
  for (const auto& m : j.value("metrics", json::array())) {
    labels[m["key"]] = m["label"].get<std::string>() + " " + m["unit"].get<std::string>();
  }
  for (const auto& r : j["ranks"]) {
    const std::string where = r["host"].get<std::string>() + ":" + std::to_string(r["local_rank"].get<int>());
    for (const auto& [key, m] : r["metrics"].items()) {
      const double best = m["best"].get<double>(), mid = m.value("median", best);
      figures[probe + " " + labels[key] + " @ " + where] = {best, best > 0 ? (best - mid) / best : 0};
    }
  }
}

// The bandwidth stage's busbw per collective at the largest size, with that size's
// iteration-to-iteration coefficient of variation from bandwidth.json.
void add_bandwidth(const ValidateOptions& o, const StageResult& r, std::map<std::string, Figure>& figures) {
  std::map<std::string, double> cv;
  const json bw = read_json(o.out_dir + "/bandwidth.json");
  for (const auto& row : bw.is_object() ? bw.value("results", json::array()) : json::array()) {
    if (!row.contains("ddx") || !row.contains("out_of_place_per_iter")) continue;
    const auto& per_iter = row["out_of_place_per_iter"];
    if (per_iter.is_object()) cv[row["ddx"].value("collective", "")] = per_iter.value("cv_pct", 0.0) / 100;  // rows ascend
  }
  for (const auto& c : r.details["collectives"]) {
    const std::string name = c["collective"].get<std::string>();
    figures["bandwidth " + name + " busbw GB/s"] = {c["busbw_gbs"].get<double>(), cv.count(name) ? cv[name] : 0};
  }
}

// The pairwise stage's median link. Its jitter: the links' relative spread (MAD / median), or
// the bandwidth stage's sendrecv jitter when larger (the same exchange; with two ranks there is
// one link and no spread to see).
void add_pairs(const ValidateOptions& o, std::map<std::string, Figure>& figures) {
  const json pairs = read_json(o.out_dir + "/pairs.json");
  if (!pairs.is_object() || !pairs.contains("ddx")) return;
  std::vector<double> links;
  for (const auto& p : pairs["ddx"].value("pairs", json::array())) links.push_back(p.value("bw", 0.0));
  const double m = pairs["ddx"].value("median_bw", 0.0);
  const auto sendrecv = figures.find("bandwidth sendrecv busbw GB/s");
  const double exchange_jitter = sendrecv == figures.end() ? 0 : sendrecv->second.jitter;
  figures["pairwise median link GB/s"] = {m, std::max(m > 0 ? median_absolute_deviation(links) / m : 0, exchange_jitter)};
}

}  // namespace

std::map<std::string, Figure> figures_of(const ValidateOptions& o, const std::vector<StageResult>& results) {
  std::map<std::string, Figure> figures;
  for (const auto& r : results) {
    if (!r.ran) continue;
    if (r.name == "compute" || r.name == "memory") add_rank_probe(o.out_dir + "/" + r.name + ".json", figures);
    if (r.name == "bandwidth" && r.details.is_object()) add_bandwidth(o, r, figures);
    if (r.name == "pairwise links") add_pairs(o, figures);
  }
  return figures;
}

nlohmann::json to_json(const std::map<std::string, Figure>& figures) {
  json j = json::object();
  for (const auto& [key, f] : figures) j[key] = {{"value", f.value}, {"jitter", f.jitter}};
  return j;
}

std::map<std::string, Figure> read_baseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--baseline " + path + ": cannot read the file");
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw UsageError("--baseline " + path + ": not JSON (expected an earlier run's validate.json)");
  if (!j.is_object() || !j.contains("figures") || !j["figures"].is_object()) {
    throw UsageError("--baseline " + path + ": no \"figures\" in it (expected the validate.json of an earlier ddx validate run)");
  }
  std::map<std::string, Figure> figures;
  for (const auto& [key, v] : j["figures"].items()) {
    // {"value", "jitter"} as validate writes it; a bare number (a hand-written baseline) has none.
    if (v.is_number()) {
      figures[key] = {v.get<double>(), 0};
    } else if (v.is_object() && v.contains("value") && v["value"].is_number()) {
      figures[key] = {v["value"].get<double>(), v.value("jitter", 0.0)};
    } else {
      throw UsageError("--baseline " + path + ": figure '" + key + "' is not a number");
    }
  }
  return figures;
}

double allowed_drop(const Figure& before, const Figure& now, double margin) {
  return std::min(0.9, std::max(margin, 3 * std::max(before.jitter, now.jitter)));
}

StageResult compare_with_baseline(const std::map<std::string, Figure>& now, const std::map<std::string, Figure>& before,
                                  double margin) {
  StageResult r;
  r.name = "baseline";
  r.ran = true;
  r.exit_code = 0;
  json regressions = json::array(), missing = json::array();
  int compared = 0;
  for (const auto& [key, old] : before) {
    const auto it = now.find(key);
    if (it == now.end()) {
      missing.push_back(key);
      continue;
    }
    ++compared;
    const double allowed = allowed_drop(old, it->second, margin);
    if (old.value > 0 && it->second.value < old.value * (1 - allowed)) {
      regressions.push_back({{"figure", key}, {"before", old.value}, {"after", it->second.value},
                             {"change", it->second.value / old.value - 1}, {"allowed", allowed}});
    }
  }
  r.passed = regressions.empty();
  r.details = {{"margin", margin}, {"compared", compared}, {"regressions", regressions}, {"missing", missing}};
  r.summary = printf_text("%d figures compared with the baseline, %zu regressed by more than %.0f%% (or 3x their jitter)",
                          compared, regressions.size(), margin * 100);
  if (!regressions.empty()) {
    const json& worst = *std::min_element(regressions.begin(), regressions.end(), [](const json& a, const json& b) {
      return a["change"].get<double>() < b["change"].get<double>();
    });
    r.summary += printf_text("; worst: %s %.4g -> %.4g (%+.0f%%)", worst["figure"].get<std::string>().c_str(),
                             worst["before"].get<double>(), worst["after"].get<double>(),
                             worst["change"].get<double>() * 100);
  }
  if (!missing.empty()) r.summary += printf_text("; %zu baseline figures not measured this time", missing.size());
  return r;
}

}  // namespace ddx::validate
