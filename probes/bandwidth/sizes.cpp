#include "bandwidth/sizes.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "ddx/errors.h"

namespace ddx::bw {

size_t parse_bytes(const std::string& flag, const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = text.substr(digits);
  size_t shift = 0;
  if (suffix.empty()) {
    shift = 0;
  } else if (suffix == "K" || suffix == "k") {
    shift = 10;
  } else if (suffix == "M" || suffix == "m") {
    shift = 20;
  } else if (suffix == "G" || suffix == "g") {
    shift = 30;
  } else if (suffix == "T" || suffix == "t") {
    shift = 40;
  } else {
    digits = 0;  // reported below
  }
  if (digits == 0 || digits > 15) {
    throw UsageError(flag + " '" + text + "' is not a byte count (a number with an optional K, M or G suffix)");
  }
  const size_t value = std::stoull(text.substr(0, digits));
  if (value > (std::numeric_limits<size_t>::max() >> shift)) {
    throw UsageError(flag + " '" + text + "' is too large");
  }
  return value << shift;
}

std::string format_bytes(size_t bytes) {
  static const char* suffixes[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + suffixes[i];
}

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
