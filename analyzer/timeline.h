#pragma once
// `ddx analyze --trace out.json`: every rank's recorded ops on one time axis, written as a
// Chrome/Perfetto trace (open in ui.perfetto.dev or chrome://tracing) and drawn as an SVG beside
// it (out.svg), so a user can see where the ranks part ways.
#include <string>
#include <vector>

#include "analyzer/diagnosis.h"

namespace ddx::analyze {

// One op on one rank's lane for its group. Times are wall-clock microseconds from the earliest
// op of any rank.
struct Slice {
  int rank = -1;
  int lane = 0;                  // the group's lane within the rank, in order of first use
  std::string title;             // "all_reduce(sum) #3", "(in flight)" or "(failed)" added
  std::string state;             // completed | in flight | failed, with how its end was drawn
  bool stuck = false;            // in flight at the dump or failed
  bool p2p = false;
  int64_t begin_us = 0, end_us = 0;
  int64_t running_us = -1;       // when the backend started it; -1: not recorded
  const Entry* entry = nullptr;
};

struct RankLanes {
  int rank = -1;
  std::string name;              // "rank 2 (node7)", "rank 3: no dump"
  bool culprit = false;
  bool has_dump = true;
  std::vector<std::string> groups;  // lane names, by lane number
  int64_t dump_us = 0;
};

struct Timeline {
  std::vector<RankLanes> ranks;  // by rank
  std::vector<Slice> slices;
  std::string verdict;           // "" when no problem was found
  int64_t end_us = 0;            // the latest dump
};

// Ops without a recorded end (Gloo; NCCL with timing off) that completed end where the rank's
// next op on the group was issued (its last one on the group: 1 ms); ops in flight at the dump
// run to the dump.
Timeline build_timeline(const TraceSet& traces, const Diagnosis& dx);

// One process per rank, one thread per group lane, an "X" slice per op with an inner "running"
// slice where the backend recorded a start, an instant on each culprit for the verdict.
std::string render_chrome_trace(const Timeline& timeline);
// The same as a picture: a row per rank and group, ops as bars (stuck ones orange, failed red),
// the culprit's rows marked.
std::string render_timeline_svg(const Timeline& timeline);

}  // namespace ddx::analyze
