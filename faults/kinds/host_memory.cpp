// host-memory: the bandwidth probe believes the host has bytes=N available, so tests can prove
// that sizes too large are reduced without allocating the machine's memory.
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class HostMemory : public Kind {
  std::string name() const override { return "host-memory"; }
  std::string category() const override { return "test"; }
  std::string summary() const override { return "report bytes=N of available host memory to the bandwidth probe"; }
  std::vector<std::string> keys() const override { return {"bytes"}; }
  void check(const FaultSpec& s) const override {
    if (s.params.count("bytes") == 0) s.fail("host-memory needs bytes=N");
    s.int_param("bytes", 1, 1, INT64_MAX);
  }
};

}  // namespace

const Kind& host_memory_kind() {
  static const HostMemory kind;
  return kind;
}

}  // namespace ddx::faults
