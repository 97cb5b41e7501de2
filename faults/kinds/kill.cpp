// kill: SIGKILL, the fault that leaves nothing behind (no handler, no error file, no flush):
// what the launcher and the peers must cope with when a node's OOM killer strikes.
#include <signal.h>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Kill : public Kind {
  std::string name() const override { return "kill"; }
  std::string category() const override { return "process"; }
  std::string summary() const override { return "SIGKILL the rank at the start of the step"; }
  void at_step(const FaultSpec& s, int64_t) const override {
    log_firing(s, "SIGKILL");
    ::raise(SIGKILL);
  }
};

}  // namespace

const Kind& kill_kind() {
  static const Kill kind;
  return kind;
}

}  // namespace ddx::faults
