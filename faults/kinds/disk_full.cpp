// disk-full: writing the step's checkpoint fails with ENOSPC on the rank, as on a full volume:
// an injected write error (a real full disk needs a tmpfs mount; docs/faults.md shows both).
// The run stops with the error; no earlier checkpoint is touched.
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class DiskFull : public Kind {
  std::string name() const override { return "disk-full"; }
  std::string category() const override { return "storage"; }
  std::string summary() const override { return "fail the step's checkpoint write with ENOSPC"; }
  void during_checkpoint(const FaultSpec& s, const std::string& staging) const override {
    log_firing(s, "ENOSPC while writing " + staging);
    throw std::filesystem::filesystem_error("injected fault " + s.text + ": cannot write checkpoint", staging,
                                            std::error_code(ENOSPC, std::generic_category()));
  }
};

}  // namespace

const Kind& disk_full_kind() {
  static const DiskFull kind;
  return kind;
}

}  // namespace ddx::faults
