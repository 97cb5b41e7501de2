#pragma once
// `ddx analyze -j` (torchfrtrace's --just-print-entries): every rank's recorded ops as tables,
// for reading what the recorder saw without a verdict; --selected-ranks and --pg-filters narrow
// it as torchfrtrace's flags of the same names do.
#include <set>
#include <string>
#include <vector>

#include "analyzer/trace_model.h"

namespace ddx::analyze {

// True when `group` ("0 (default_pg)", "world", "tp/1") is one of `filters`, by its name or
// by its description ("default_pg" also names ddx's "world"); an empty filter list matches
// every group.
bool group_matches(const std::string& group, const std::vector<std::string>& filters);

// One table per rank (those in `ranks`, every rank when empty), oldest op first.
std::string render_entries(const TraceSet& traces, const std::set<int>& ranks, const std::vector<std::string>& pg_filters);

}  // namespace ddx::analyze
