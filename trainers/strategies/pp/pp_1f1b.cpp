// 1F1B (PipeDream-flush, Megatron's non-interleaved schedule): rank r runs p - r - 1 warm-up
// forwards, then alternates one forward with one backward, then drains the backwards. The same
// bubble as GPipe, but at most p - r micro-batches are in flight instead of m.
#include <algorithm>

#include "strategies/pp/pp_schedule.h"

namespace ddx::train {

PipeSchedule one_f_one_b_schedule(const PipeShape& shape) {
  const int m = shape.microbatches;
  const int warmup = std::min(shape.ranks - shape.rank - 1, m);
  PipeSchedule out;
  for (int mb = 0; mb < warmup; ++mb) out.push_back({PipeAction::Kind::Forward, mb, 0});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({PipeAction::Kind::Forward, warmup + i, 0});
    out.push_back({PipeAction::Kind::Backward, i, 0});
  }
  for (int mb = m - warmup; mb < m; ++mb) out.push_back({PipeAction::Kind::Backward, mb, 0});
  return out;
}

}  // namespace ddx::train
