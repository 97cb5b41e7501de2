#pragma once
// Loading flight recorder dumps, ddx's own and PyTorch's, tolerating missing, truncated and
// unreadable files (each is reported by rank and file, never fatal).
#include <string>
#include <vector>

#include "analyzer/trace_model.h"

namespace ddx::analyze {

// Parses one dump. A cut-off file is salvaged (header plus every complete entry; `truncated`
// set). Throws std::runtime_error saying what is wrong when nothing usable is left.
RankDump parse_dump(const std::string& text, const std::string& path);

// Reads the dumps `inputs` name: directories (each file in them whose name ends in a rank
// number, or is `prefix` and a rank number when a prefix is given) and files. Each file's format
// is detected from its content (ddx's JSON, PyTorch's pickle or PyTorch's JSON), so mixed sets
// work. A file that cannot be used is a DumpProblem naming it, never fatal; throws UsageError
// when an input does not exist or nothing looks like a dump.
TraceSet load_traces(const std::vector<std::string>& inputs, const std::string& prefix = "", int world_size = 0);

// Reads every dump in `dir`. `world_size` 0 takes it from the dumps. Throws UsageError when
// `dir` is not a directory or holds no dump at all.
TraceSet load_trace_dir(const std::string& dir, int world_size = 0);

}  // namespace ddx::analyze
