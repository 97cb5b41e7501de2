#pragma once
// Baselines of `ddx health`: the median and spread of every judged figure, per device model,
// built from many nodes' reports (the fleet's) or from one node's own earlier runs, saved as JSON
// and read back. A figure is low by the rule every ddx probe uses (ddx/outliers.h: below the
// median by more than both a margin and 3 scaled MADs). No LibTorch.
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ddx/outliers.h"
#include "health/health_check.h"

namespace ddx::health {

// A metric's name and labels but the host: `ddx_health_gemm_tflops{device="gpu0",dtype="bf16"}`.
std::string metric_key(const Metric& metric);
// The same for people, in a table column or a drain reason: "gemm_tflops gpu0 bf16".
std::string metric_label(const Metric& metric);

// The figures of a report a baseline judges: its judged metrics, the first of each key.
std::vector<Metric> judged_metrics(const Report& report);

struct BaselineFigure {
  double median = 0;
  double mad = 0;   // unscaled median absolute deviation
  int count = 0;    // reports it was built from
};

struct Baseline {
  // device model -> metric key -> figure
  std::map<std::string, std::map<std::string, BaselineFigure>> models;
};

Baseline build_baseline(const std::vector<Report>& reports);
nlohmann::json baseline_to_json(const Baseline& baseline);
// Throws std::runtime_error naming what is wrong in the file.
Baseline baseline_from_json(const nlohmann::json& json);
// The file given with --baseline (`ddx health`, `ddx health fleet`), read before any work: throws
// UsageError "--baseline <path>: <what is wrong>".
Baseline read_baseline_file(const std::string& path);

// The rule a figure is judged by when the caller gives none: the margin ddx's node probes use
// (probes/node/rank_probe.cpp), 0.10 for a figure measured on GPUs (a label names one, "gpu0",
// "cuda:1", or the engine "nccl") and 0.25 for every other (CPU figures on a shared machine are
// noisy), and 3 scaled MADs.
OutlierRule rule_for(const Metric& metric);

// One judged figure against a reference (the baseline's or its peers' median).
struct FigureJudgement {
  Metric metric;
  double median = 0;     // the reference
  double threshold = 0;  // below it the figure is low
  bool low = false;
};

// The row of one judgement; `reference` says what the median is ("the baseline's", "its
// peers'"). Named "<metric key>"; WARN when low, with a reason, else OK.
Check judgement_row(const FigureJudgement& judgement, const std::string& reference);

// Every judged figure of `report` that the baseline knows for the report's device model, judged
// by `rule` (by rule_for(metric) without one); the keys of the figures the baseline lacks go to
// `unknown_keys` when given.
std::vector<FigureJudgement> judge_figures(const Report& report, const Baseline& baseline,
                                           std::vector<std::string>* unknown_keys = nullptr,
                                           const std::optional<OutlierRule>& rule = std::nullopt);

// One row per judged figure of `report` that the baseline knows for the report's device model:
// WARN when low by the rule (the value, the baseline's median, the threshold), else OK. A figure
// the baseline lacks is one skipped row naming it. Without a rule, each figure's rule_for().
std::vector<Check> judge_against_baseline(const Report& report, const Baseline& baseline,
                                          const std::optional<OutlierRule>& rule = std::nullopt);

}  // namespace ddx::health
