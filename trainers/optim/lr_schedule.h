#pragma once
// Learning rate per optimizer step: linear warmup, then cosine decay to lr*0.01 over
// `decay_steps` (the guide's CosineAnnealingLR with T_max=1000, eta_min=lr*1e-2), then flat.
#include <cstdint>

namespace ddx::train {

// `step` counts optimizer steps from 0 (the lr used by the first update).
double learning_rate(int64_t step, double peak_lr, int64_t warmup_steps, int64_t decay_steps);

}  // namespace ddx::train
