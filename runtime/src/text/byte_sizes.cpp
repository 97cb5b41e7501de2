#include "ddx/text/byte_sizes.h"

#include <cctype>
#include <limits>

#include "ddx/errors/errors.h"

namespace ddx {

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

}  // namespace ddx
