#include "observe/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace ddx::train {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressBar::ProgressBar(int64_t total_steps, bool enabled)
    : total_(total_steps), enabled_(enabled && ::isatty(STDERR_FILENO)), start_(now_s()) {}

void ProgressBar::update(int64_t step, double loss, double tokens_per_s) {
  if (!enabled_) return;
  if (first_step_ < 0) first_step_ = step - 1;
  const double frac = total_ > 0 ? static_cast<double>(step) / static_cast<double>(total_) : 0;
  const int width = 30;
  const int filled = static_cast<int>(frac * width);
  char bar[width + 1];
  for (int i = 0; i < width; ++i) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
  bar[width] = 0;
  const double elapsed = now_s() - start_;
  const double per_step = elapsed / static_cast<double>(std::max<int64_t>(1, step - first_step_));
  const double eta = per_step * static_cast<double>(total_ - step);
  std::fprintf(stderr, "\r[%s] step %lld/%lld  loss %.4f  %.0f tok/s  eta %02d:%02d ", bar,
               static_cast<long long>(step), static_cast<long long>(total_), loss, tokens_per_s,
               static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_) std::fprintf(stderr, "\n");
}

}  // namespace ddx::train
