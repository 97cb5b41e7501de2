#include "bandwidth/sizes.h"

#include <cmath>

namespace ddx::bw {

std::vector<size_t> sweep_sizes(size_t min, size_t max, double step_factor, size_t step_bytes) {
  std::vector<size_t> sizes;
  if (max < min) return sizes;
  if (step_factor > 1) {
    for (double size = static_cast<double>(min); size <= static_cast<double>(max);) {
      sizes.push_back(static_cast<size_t>(size));
      const double next = std::floor(size * step_factor);
      if (next <= size) break;  // min 0 or a factor too small to move
      size = next;
    }
  } else {
    if (step_bytes == 0) return {min};
    for (size_t size = min; size <= max; size += step_bytes) {
      sizes.push_back(size);
      if (size > max - step_bytes) break;  // the next step would overflow or pass max
    }
  }
  return sizes;
}

}  // namespace ddx::bw
