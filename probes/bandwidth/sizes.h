#pragma once
// The size sweep, as nccl-tests defines it: -b/--minbytes to -e/--maxbytes, multiplied by
// -f/--stepfactor when it is > 1, otherwise stepped by -i/--stepbytes. K/M/G suffixes are
// binary (1024^n).
#include <cstddef>
#include <string>
#include <vector>

namespace ddx::bw {

// "8", "128K", "32M", "8G" -> bytes. Throws UsageError naming `flag` when malformed.
size_t parse_bytes(const std::string& flag, const std::string& text);

// 33554432 -> "32M" when exact, otherwise the plain number (for headers and messages).
std::string format_bytes(size_t bytes);

// Every size of the sweep, smallest first; always includes `min` and never exceeds `max`.
std::vector<size_t> sweep_sizes(size_t min, size_t max, double step_factor, size_t step_bytes);

}  // namespace ddx::bw
