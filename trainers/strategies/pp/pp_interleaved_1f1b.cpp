// Interleaved 1F1B (Narayanan et al. 2021; Megatron's interleaved schedule): each rank holds V
// stages and walks micro-batches in groups of p, running chunk 0 of the group, then chunk 1, ...
// Warm-up is (p - r - 1) * 2 + (V - 1) * p forwards, then one forward / one backward, then the
// remaining backwards (chunks in reverse). The bubble shrinks V-fold at V-fold more P2P traffic.
// Needs m divisible by p.
#include <algorithm>

#include "strategies/pp/pp_schedule.h"

namespace ddx::train {
namespace {

// The k-th forward (or backward) of this rank: micro-batch and chunk.
PipeAction nth(const PipeShape& s, int k, PipeAction::Kind kind) {
  const int group = k / (s.ranks * s.virtual_stages), in_group = k % (s.ranks * s.virtual_stages);
  int chunk = in_group / s.ranks;
  if (kind == PipeAction::Kind::Backward) chunk = s.virtual_stages - 1 - chunk;
  return {kind, group * s.ranks + in_group % s.ranks, chunk};
}

}  // namespace

PipeSchedule interleaved_1f1b_schedule(const PipeShape& s) {
  const int total = s.microbatches * s.virtual_stages;
  const int warmup = std::min((s.ranks - s.rank - 1) * 2 + (s.virtual_stages - 1) * s.ranks, total);
  PipeSchedule out;
  for (int k = 0; k < warmup; ++k) out.push_back(nth(s, k, PipeAction::Kind::Forward));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(nth(s, warmup + k, PipeAction::Kind::Forward));
    out.push_back(nth(s, k, PipeAction::Kind::Backward));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(nth(s, k, PipeAction::Kind::Backward));
  return out;
}

// Each rank's V chunks are 1/V of its work, so the p - 1 slots of fill and drain are V times
// shorter: (p - 1) / (V m + p - 1) of the step.
double interleaved_bubble(const PipeShape& s) {
  return static_cast<double>(s.ranks - 1) /
         static_cast<double>(s.virtual_stages * s.microbatches + s.ranks - 1);
}

}  // namespace ddx::train
