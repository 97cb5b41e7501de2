#pragma once
// How much /dev/shm NCCL's shared-memory transport needs on one node, and how much a tmpfs has.
// No LibTorch: `ddx probe buserror`, `ddx doctor` and the unit tests share it.
//
// The model (NCCL src/transport/shm.cc, see ../shared/reference/hangs-and-bus-errors.md §9.2):
// every SHM connection is one file /dev/shm/nccl-XXXXXX, allocated by the receiving rank, holding
// a one-page header plus the three protocol buffers:
//   LL     8 lines x 512 threads x 8 steps x 16 B = 524,288 B    (NCCL_LL_BUFFSIZE)
//   LL128  120 x 640 x 8 x 8 B                    = 4,915,200 B  (NCCL_LL128_BUFFSIZE)
//   SIMPLE                                        = 4,194,304 B  (NCCL_BUFFSIZE)
// = 9,637,888 B (~9.19 MiB), the size seen in NCCL's own error reports. A node needs one such
// segment per channel for every ordered pair of local ranks that talk over SHM. Proxy pools
// are not counted: the estimate is a floor, not a ceiling.
#include <cstdint>
#include <string>
#include <vector>

#include "ddx/processes/env.h"

namespace ddx::shm {

constexpr uint64_t kHeaderBytes = 4096;
constexpr uint64_t kLlBytes = 524288;
constexpr uint64_t kLl128Bytes = 4915200;
constexpr uint64_t kSimpleBytes = 4194304;
constexpr int kDefaultChannels = 2;

// One connection's segment size, honouring NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE and
// NCCL_LL128_BUFFSIZE in `env` (UsageError naming the variable when one is not a byte count).
uint64_t segment_bytes(const EnvMap& env);

// One segment: the receiving local rank, the sending peer, the channel.
struct Segment {
  int owner = 0;
  int peer = 0;
  int channel = 0;
};

struct ShmPlan {
  int local_ranks = 0;
  int channels = 0;
  uint64_t segment_bytes = 0;
  std::vector<Segment> segments;  // owner-major, as each rank allocates its own
  uint64_t total_bytes() const { return segment_bytes * segments.size(); }
  // Segments `rank` allocates.
  std::vector<Segment> owned_by(int rank) const;
  // "4 local ranks x 3 peers x 2 channels x 9637888 B = 231309312 B (220.6 MiB)"
  std::string formula() const;
};

ShmPlan plan(int local_ranks, int channels, uint64_t segment_bytes);

// What statfs() says about a folder.
struct ShmSpace {
  std::string path;
  uint64_t size_bytes = 0;
  uint64_t free_bytes = 0;  // available to this user
  bool is_tmpfs = false;
};

// Throws UsageError naming `path` when it cannot be read.
ShmSpace space_of(const std::string& path);

// "220.6 MiB"
std::string mib(uint64_t bytes);

// The fixes, one line each, for a node that needs `needed` bytes (rounded up for the advice).
std::vector<std::string> fixes(uint64_t needed);

}  // namespace ddx::shm
