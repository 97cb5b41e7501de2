#include "bandwidth/host_memory.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "faults/faults.h"

namespace ddx::bw {

size_t available_host_memory() {
  // The host-memory test switch (faults/kinds/host_memory.cpp), so tests can prove that sizes
  // too large are reduced without allocating the machine's memory. Deliberately not a flag.
  if (const faults::FaultSpec* forced = faults::find("host-memory")) {
    return static_cast<size_t>(forced->int_param("bytes", 1, 1, std::numeric_limits<int64_t>::max()));
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
