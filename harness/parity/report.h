#pragma once
// The suite's outputs: the table on stdout, report.json, JUnit XML, and the loss-curve plot.
#include <string>
#include <vector>

#include "harness/parity/curves.h"

namespace ddx::parity {

struct RunReport {
  std::string name;      // "ddp", "determinism", "golden", ...
  std::string strategy;  // the variant's strategy name (for the JSON's "strategy")
  int world_size = 1;
  std::string verdict;   // PASS | FAIL | ERROR | SKIP (the model cannot take this layout: comparison.note says why)
  Comparison comparison;
  std::vector<StepPoint> curve;
  std::string log_path;
  double seconds = 0;
};

void print_table(const std::vector<RunReport>& runs, const Tolerances& tolerances);
void write_report_json(const std::string& path, const std::vector<StepPoint>& baseline,
                       const std::vector<RunReport>& runs, const Tolerances& tolerances,
                       const std::string& environment_json);
void write_junit(const std::string& path, const std::vector<RunReport>& runs, const Tolerances& tolerances);
void write_parity_plot(const std::string& path, const std::vector<StepPoint>& baseline,
                       const std::vector<RunReport>& runs);

}  // namespace ddx::parity
