// ckpt-torn: the rank dies (SIGKILL) after writing its checkpoint files and before the checkpoint
// is complete, as a node lost mid-save. The checkpoint folder stays a staging folder, never read
// on resume; the previous checkpoint is the latest valid one.
#include <signal.h>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class CkptTorn : public Kind {
  std::string name() const override { return "ckpt-torn"; }
  std::string category() const override { return "storage"; }
  std::string summary() const override { return "SIGKILL in the middle of writing the step's checkpoint"; }
  void during_checkpoint(const FaultSpec& s, const std::string& staging) const override {
    log_firing(s, "SIGKILL while writing " + staging);
    ::raise(SIGKILL);
  }
};

}  // namespace

const Kind& ckpt_torn_kind() {
  static const CkptTorn kind;
  return kind;
}

}  // namespace ddx::faults
