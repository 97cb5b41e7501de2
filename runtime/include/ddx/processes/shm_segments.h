#pragma once
// Shared-memory segments made the two ways NCCL has made them, in a folder on a tmpfs. Each file
// is unlinked as soon as it is open, so nothing is left behind, not even when the process dies
// of SIGBUS half-way; the tmpfs keeps the pages charged until the last descriptor or mapping goes.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx::shm {

class SegmentSet {
 public:
  SegmentSet() = default;
  ~SegmentSet();
  SegmentSet(const SegmentSet&) = delete;
  SegmentSet& operator=(const SegmentSet&) = delete;

  // NCCL 2.12.7-2.18.x (ncclShmSetup): ftruncate() makes a sparse file, mmap() it, then write
  // every page. A full tmpfs cannot back the page being written and the kernel raises SIGBUS
  // in this process: that is the crash being reproduced. Throws std::runtime_error when a
  // system call fails (not for the SIGBUS, which never returns).
  void add_sparse_and_touch(const std::string& dir, uint64_t bytes);

  // NCCL >= 2.19.1: fallocate() reserves every page up front and fails with an errno
  // (ENOSPC on a full tmpfs) instead of crashing later. Returns 0 or the errno.
  int add_fallocated(const std::string& dir, uint64_t bytes);

  size_t count() const { return fds_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  int create_unlinked(const std::string& dir);

  std::vector<int> fds_;
  std::vector<std::pair<void*, uint64_t>> maps_;
  uint64_t bytes_ = 0;
};

}  // namespace ddx::shm
