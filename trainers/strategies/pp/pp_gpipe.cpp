// GPipe (Huang et al. 2019): every micro-batch forward, then every backward. Simple, and every
// micro-batch's activations are held at once (m in flight).
#include "strategies/pp/pp_schedule.h"

namespace ddx::train {

PipeSchedule gpipe_schedule(const PipeShape& shape) {
  PipeSchedule out;
  for (int mb = 0; mb < shape.microbatches; ++mb) out.push_back({PipeAction::Kind::Forward, mb, 0});
  for (int mb = 0; mb < shape.microbatches; ++mb) out.push_back({PipeAction::Kind::Backward, mb, 0});
  return out;
}

// The first stage waits p - 1 slots for the last to start, and the last waits as long at the
// end: (p - 1) idle slots of m + p - 1 (Narayanan et al. 2021).
double flush_bubble(const PipeShape& s) {
  return static_cast<double>(s.ranks - 1) / static_cast<double>(s.microbatches + s.ranks - 1);
}

}  // namespace ddx::train
