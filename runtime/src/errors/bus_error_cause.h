#pragma once
// Internal: why a SIGBUS happened, when the reason is the common one in training jobs: the page
// belongs to a shared-memory file (NCCL's SHM segments, DataLoader batches) on a tmpfs that is
// full, so the kernel could not back it (../shared/reference/hangs-and-bus-errors.md §9). Read
// by the fatal-signal handler, so the report names the cause instead of a bare "Bus error".
#include <string>

namespace ddx::detail {

struct BusErrorCause {
  // "; the address is in /dev/shm/nccl-Ab12Cd (deleted), a file on a tmpfs with 0.0 of 4.0 MiB
  // free: shared memory is exhausted ..." when `address` is in a mapping of a file on a tmpfs
  // with less than a page free; "" otherwise (other mappings, other filesystems, /proc unreadable).
  std::string text;
  std::string file, tmpfs;  // with text: the mapped file and the tmpfs it is on
  double free_bytes = 0, size_bytes = 0;
};
BusErrorCause bus_error_cause(const void* address);

}  // namespace ddx::detail
