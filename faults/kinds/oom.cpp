// oom: allocate until the allocator fails. The address space is first capped at the current
// size plus mib=N (default 512), so the allocator fails for real (std::bad_alloc, uncaught) without
// taking the machine's memory from the other ranks or jobs.
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Oom : public Kind {
  std::string name() const override { return "oom"; }
  std::string category() const override { return "process"; }
  std::string summary() const override { return "allocate until the allocator fails (address space capped at +mib=N)"; }
  std::vector<std::string> keys() const override { return {"mib"}; }
  void check(const FaultSpec& s) const override { s.int_param("mib", 512, 1, 1 << 20); }
  void at_step(const FaultSpec& s, int64_t) const override {
    const int64_t mib = s.int_param("mib", 512, 1, 1 << 20);
    log_firing(s, "allocating until the allocator fails (" + std::to_string(mib) + " MiB of headroom)");
    std::ifstream statm("/proc/self/statm");
    uint64_t pages = 0;
    statm >> pages;
    const rlim_t cap = static_cast<rlim_t>(pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) +
                                           static_cast<uint64_t>(mib) * (1u << 20));
    struct rlimit limit{};
    ::getrlimit(RLIMIT_AS, &limit);
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? cap : std::min(cap, limit.rlim_max);
    ::setrlimit(RLIMIT_AS, &limit);
    std::vector<std::unique_ptr<char[]>> held;
    for (;;) {
      held.emplace_back(new char[16u << 20]);
      std::memset(held.back().get(), 1, 16u << 20);  // touched: resident, not only reserved
    }
  }
};

}  // namespace

const Kind& oom_kind() {
  static const Oom kind;
  return kind;
}

}  // namespace ddx::faults
