#include "train/test_breaks.h"

#include <cstdlib>
#include <sstream>
#include <vector>

#include "ddx/env.h"
#include "ddx/errors.h"
#include "ddx/log.h"

namespace ddx::train {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

TestBreaks parse() {
  TestBreaks b;
  const char* spec = std::getenv("DDX_TEST_BREAK");
  if (!spec || !*spec) return b;
  for (const std::string& item : split(spec, ',')) {
    auto parts = split(item, ':');
    if (item == "uneven-tokens") {
      b.uneven_tokens = true;
    } else if (item == "local-mean") {
      b.local_mean = true;
    } else if (item == "fsdp-double-divide") {
      b.fsdp_double_divide = true;
    } else if (item == "tp-no-input-reduce") {
      b.tp_no_input_reduce = true;
    } else if (item == "pp-double-microbatch") {
      b.pp_double_microbatch = true;
    } else if (parts.size() == 3 && parts[0] == "scale-grad") {
      b.scale_grad_rank = static_cast<int>(parse_int("DDX_TEST_BREAK scale-grad rank", parts[1], 0, 1 << 20));
      try {
        b.scale_grad_factor = std::stod(parts[2]);
      } catch (const std::exception&) {
        throw UsageError("DDX_TEST_BREAK scale-grad factor '" + parts[2] + "' is not a number");
      }
    } else if (parts.size() == 2 && parts[0] == "skip-bucket") {
      b.skip_bucket = static_cast<int>(parse_int("DDX_TEST_BREAK skip-bucket", parts[1], 0, 1 << 20));
    } else {
      throw UsageError("DDX_TEST_BREAK item '" + item +
                       "' is not one of uneven-tokens, local-mean, scale-grad:R:F, skip-bucket:K, fsdp-double-divide, "
                       "tp-no-input-reduce, pp-double-microbatch");
    }
  }
  if (b.any_bug()) log::warn("DDX_TEST_BREAK=", spec, ": this run is deliberately wrong (a parity self-test)");
  return b;
}

}  // namespace

const TestBreaks& test_breaks() {
  static const TestBreaks breaks = parse();
  return breaks;
}

}  // namespace ddx::train
