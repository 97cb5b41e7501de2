#include "bandwidth/host_memory.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "ddx/env.h"

namespace ddx::bw {

size_t available_host_memory() {
  // Test-only override, so tests can prove that sizes too large are reduced without
  // allocating the machine's memory. Deliberately not a flag. Parsed strictly: a malformed
  // value read as 0 would mean "unknown", i.e. no limit, and the test would prove nothing.
  if (auto forced = env_get(current_env(), "DDX_TEST_HOST_MEMORY")) {
    return static_cast<size_t>(parse_int("DDX_TEST_HOST_MEMORY", *forced, 1, std::numeric_limits<long long>::max()));
  }
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    size_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

size_t host_buffer_budget(size_t available, int local_ranks) {
  if (available == 0) return std::numeric_limits<size_t>::max();  // unknown: do not limit
  const size_t per_rank = available / static_cast<size_t>(local_ranks > 0 ? local_ranks : 1);
  return per_rank / 5 * 4 / 3;  // 80 % of the rank's share, over send + receive + scratch
}

}  // namespace ddx::bw
