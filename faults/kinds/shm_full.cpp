// shm-full: at the step the rank fills the tmpfs at path=DIR (default /dev/shm) until it has no
// page left, then creates a shared-memory segment the way NCCL 2.12.7-2.18 sets up its SHM
// transport (sparse file, mmap, zero every page: probes/buserror's segments): the first page
// cannot be backed and the kernel kills the rank with SIGBUS. The fatal-signal report names the
// cause (the full tmpfs, its size, the segment) and the launcher the rank. The files are
// unlinked when made, so the space is the tmpfs's again once the rank is gone. Tests run it in
// a private mount namespace with a tiny tmpfs on /dev/shm, never on the host's.
#include <cerrno>
#include <cstring>

#include "ddx/processes/shm_segments.h"
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class ShmFull : public Kind {
  std::string name() const override { return "shm-full"; }
  std::string category() const override { return "memory"; }
  std::string summary() const override { return "fill the tmpfs at path=DIR (default /dev/shm), then touch a new segment: SIGBUS"; }
  std::vector<std::string> keys() const override { return {"path"}; }
  void at_step(const FaultSpec& s, int64_t) const override {
    const std::string dir = s.text_param("path", "/dev/shm");
    log_firing(s, "filling " + dir + ", then touching a new shared-memory segment");
    static shm::SegmentSet filled;  // held until the process dies: that is the fault
    // Halving chunks from 1 GiB: a few files even on a large tmpfs, down to the last page.
    for (uint64_t chunk = uint64_t{1} << 30; chunk >= 4096;) {
      const int rc = filled.add_fallocated(dir, chunk);
      if (rc == ENOSPC) {
        chunk /= 2;
      } else if (rc != 0) {
        s.fail("cannot fill " + dir + ": " + std::strerror(rc));
      }
    }
    filled.add_sparse_and_touch(dir, uint64_t{1} << 20);  // SIGBUS here on the full tmpfs
    s.fail(dir + " still had room after being filled (not a tmpfs?)");
  }
};

}  // namespace

const Kind& shm_full_kind() {
  static const ShmFull kind;
  return kind;
}

}  // namespace ddx::faults
