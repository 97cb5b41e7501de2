#pragma once
// How `ddx analyze` prints a diagnosis: the verdict first (culprit ranks, host, collective,
// call site), then the findings with their evidence and the per-rank table; or JSON.
#include <string>

#include "analyzer/diagnosis.h"

namespace ddx::analyze {

std::string render_text(const TraceSet& traces, const Diagnosis& dx);
std::string render_json(const TraceSet& traces, const Diagnosis& dx);
// The verdict line alone ("VERDICT: ..." or "no problem found ...").
std::string verdict_line(const TraceSet& traces, const Diagnosis& dx);

}  // namespace ddx::analyze
