#pragma once
// The size sweep, as nccl-tests defines it: -b/--minbytes to -e/--maxbytes, multiplied by
// -f/--stepfactor when it is > 1, otherwise stepped by -i/--stepbytes (the bounds are read
// by ddx::parse_bytes: K/M/G suffixes are binary, 1024^n).
#include <cstddef>
#include <string>
#include <vector>

#include "ddx/text/byte_sizes.h"  // parse_bytes for -b/-e, format_bytes for the headers

namespace ddx::bw {

// Every size of the sweep, smallest first; always includes `min` and never exceeds `max`.
std::vector<size_t> sweep_sizes(size_t min, size_t max, double step_factor, size_t step_bytes);

}  // namespace ddx::bw
