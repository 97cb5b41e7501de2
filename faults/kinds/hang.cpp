// hang: the rank stops at the start of the step and never issues another collective; its peers
// block in theirs until the collective timeout, and the hang detector must name this rank.
#include <unistd.h>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Hang : public Kind {
  std::string name() const override { return "hang"; }
  std::string category() const override { return "communication"; }
  std::string summary() const override { return "stop issuing collectives (sleep until killed)"; }
  void at_step(const FaultSpec& s, int64_t) const override {
    log_firing(s, "no longer issuing collectives");
    for (;;) ::pause();  // signals that only set a flag (SIGTERM in ddx train) wake it: sleep again
  }
};

}  // namespace

const Kind& hang_kind() {
  static const Hang kind;
  return kind;
}

}  // namespace ddx::faults
