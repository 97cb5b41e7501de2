#pragma once
// `--pp-trace FILE.svg`: the schedule picture. One row per pipeline rank, time to the right:
// each forward and backward as a box labelled with its micro-batch (stage colours, backwards
// darker), receives as the time a rank sat waiting, sends as ticks, for the steps the run
// traced (measured by the executor, not the planned table), with the measured bubble next to
// the theoretical one. No LibTorch.
#include <string>
#include <vector>

#include "strategies/pp/pp_schedule.h"

namespace ddx::train {

struct PipeTraceInfo {
  std::string schedule;
  int ranks = 1, virtual_stages = 1, microbatches = 1, steps = 0;
  double bubble_measured = 0;     // mean over the traced steps
  double bubble_theoretical = 0;  // ScheduleKind::theoretical_bubble
};

// The SVG document for `per_rank` events (index = pipeline rank).
std::string render_pipeline_trace(const std::vector<std::vector<PipeEvent>>& per_rank, const PipeTraceInfo& info);
// Written atomically.
void write_pipeline_trace(const std::string& path, const std::vector<std::vector<PipeEvent>>& per_rank,
                          const PipeTraceInfo& info);

}  // namespace ddx::train
