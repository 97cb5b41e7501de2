#pragma once
// What `ddx analyze --json` concluded about a trace folder, for the suites that run it on their
// jobs' flight-recorder dumps (the fault matrix's hang rows, validate's burn-in). Read from the
// analyzer's JSON report, never from the wording of its text report.
#include <string>
#include <vector>

namespace ddx::harness {

struct AnalyzeVerdict {
  bool problem_found = false;
  std::vector<int> culprits;  // the verdict's ranks (empty when it names none)
  std::string summary;        // the verdict's one sentence
  std::string line;           // the text report's "VERDICT: <kind>: <summary> [culprit: ...]"
};

// Runs `ddx analyze --json <traces>` (this binary; killed after 120 s) with its output kept in
// `json_path`. No problem found when the analyzer wrote no usable report.
AnalyzeVerdict analyze_traces(const std::string& traces, const std::string& json_path);

}  // namespace ddx::harness
