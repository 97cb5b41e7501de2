#pragma once
// Loading a trace directory: every ddx-fr-rank<R>.json, tolerating missing, truncated and
// unreadable files (each is reported by rank, never fatal).
#include <string>

#include "analyzer/trace_model.h"

namespace ddx::analyze {

// Parses one dump. A cut-off file is salvaged (header plus every complete entry; `truncated`
// set). Throws std::runtime_error saying what is wrong when nothing usable is left.
RankDump parse_dump(const std::string& text, const std::string& path);

// Reads every dump in `dir`. `world_size` 0 takes it from the dumps. Throws UsageError when
// `dir` is not a directory or holds no dump at all.
TraceSet load_trace_dir(const std::string& dir, int world_size = 0);

}  // namespace ddx::analyze
