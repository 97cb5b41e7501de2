#pragma once
// The strict parser of what `nvidia-smi` printed on a host polled over ssh (the guide's
// top-cluster.py counted ssh's error lines as processes and crashed on a stray comma). Only
// stdout is parsed, stderr never; a line that is not exactly what the query asked for is
// reported in `malformed` and not counted. No LibTorch.
#include <string>
#include <vector>

#include "top/top_model.h"

namespace ddx::top {

// The query run on every host: GPU lines, the marker line, then one line per compute process.
extern const char* const kSmiQuery;
extern const char* const kSmiMarker;  // "ddx-top-compute-apps"

struct SmiResult {
  std::vector<GpuStats> gpus;
  bool complete = false;               // the marker was seen: both queries ran
  int processes = 0;                   // compute processes (lines that are a pid)
  std::vector<std::string> malformed;  // "line 3: 'ssh: connect ...': expected 7 fields, got 1"
};

// `stdout_text`: what kSmiQuery printed (GPU CSV, the marker, process CSV).
SmiResult parse_smi_output(const std::string& stdout_text);

}  // namespace ddx::top
