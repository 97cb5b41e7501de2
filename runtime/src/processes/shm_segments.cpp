#include "ddx/processes/shm_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddx::shm {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

SegmentSet::~SegmentSet() {
  for (auto [addr, len] : maps_) ::munmap(addr, len);
  for (int fd : fds_) ::close(fd);
}

int SegmentSet::create_unlinked(const std::string& dir) {
  std::string path = dir + "/ddx-nccl-XXXXXX";  // NCCL names its files nccl-XXXXXX
  int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) fail("cannot create a segment in " + dir);
  ::unlink(path.c_str());
  fds_.push_back(fd);
  return fd;
}

void SegmentSet::add_sparse_and_touch(const std::string& dir, uint64_t bytes) {
  const int fd = create_unlinked(dir);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) fail("ftruncate");
  void* addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) fail("mmap");
  maps_.emplace_back(addr, bytes);
  // Zeroing the buffers, as NCCL does, writes every page: each write fault asks the tmpfs for
  // a page, and a full one answers with SIGBUS.
  std::memset(addr, 0, bytes);
  bytes_ += bytes;
}

int SegmentSet::add_fallocated(const std::string& dir, uint64_t bytes) {
  const int fd = create_unlinked(dir);
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) return rc;
  bytes_ += bytes;
  return 0;
}

}  // namespace ddx::shm
