#include "bandwidth/host_memory.h"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

namespace ddx::bw {

size_t available_host_memory() {
  // Test-only override, so tests can prove that sizes too large are reduced without
  // allocating the machine's memory. Deliberately not a flag.
  if (const char* forced = std::getenv("DDX_TEST_HOST_MEMORY"); forced && *forced) {
    return static_cast<size_t>(std::strtoull(forced, nullptr, 10));
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
