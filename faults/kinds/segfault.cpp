// segfault: a real invalid write, so the crash handler's stack trace and error file are tested
// the way a bad kernel launch or a use-after-free would reach them.
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Segfault : public Kind {
  std::string name() const override { return "segfault"; }
  std::string category() const override { return "process"; }
  std::string summary() const override { return "write through a null pointer (SIGSEGV)"; }
  void at_step(const FaultSpec& s, int64_t) const override {
    log_firing(s, "writing through a null pointer");
    // volatile pointer: the compiler cannot prove it null and turn the write into a trap (SIGILL).
    volatile int* volatile target = nullptr;
    *target = 1;
  }
};

}  // namespace

const Kind& segfault_kind() {
  static const Segfault kind;
  return kind;
}

}  // namespace ddx::faults
