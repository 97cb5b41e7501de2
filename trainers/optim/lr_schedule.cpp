#include "optim/lr_schedule.h"

#include <cmath>

namespace ddx::train {

double learning_rate(int64_t step, double peak_lr, int64_t warmup_steps, int64_t decay_steps) {
  if (step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const double min_lr = peak_lr * 0.01;
  const int64_t t = step - warmup_steps;
  if (t >= decay_steps) return min_lr;
  const double pi = std::acos(-1.0);
  const double progress = static_cast<double>(t) / static_cast<double>(decay_steps);
  return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + std::cos(pi * progress));
}

}  // namespace ddx::train
