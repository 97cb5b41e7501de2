// abort: an uncaught C++ exception, which ends in std::terminate (the error file names it).
#include <stdexcept>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Abort : public Kind {
  std::string name() const override { return "abort"; }
  std::string category() const override { return "process"; }
  std::string summary() const override { return "throw an uncaught C++ exception (std::terminate)"; }
  void at_step(const FaultSpec& s, int64_t step) const override {
    log_firing(s, "throwing an uncaught exception");
    throw std::runtime_error("injected fault " + s.text + " at step " + std::to_string(step));
  }
};

}  // namespace

const Kind& abort_kind() {
  static const Abort kind;
  return kind;
}

}  // namespace ddx::faults
