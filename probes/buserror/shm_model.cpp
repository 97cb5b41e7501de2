#include "buserror/shm_model.h"

#include <sys/statfs.h>
#include <linux/magic.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "ddx/errors/errors.h"

namespace ddx::shm {
namespace {

uint64_t env_bytes(const EnvMap& env, const std::string& key, uint64_t fallback) {
  auto value = env_get(env, key);
  if (!value || value->empty()) return fallback;
  return static_cast<uint64_t>(parse_int(key, *value, 1, 1LL << 40));
}

}  // namespace

uint64_t segment_bytes(const EnvMap& env) {
  return kHeaderBytes + env_bytes(env, "NCCL_LL_BUFFSIZE", kLlBytes) +
         env_bytes(env, "NCCL_LL128_BUFFSIZE", kLl128Bytes) + env_bytes(env, "NCCL_BUFFSIZE", kSimpleBytes);
}

std::vector<Segment> ShmPlan::owned_by(int rank) const {
  std::vector<Segment> mine;
  for (const auto& s : segments) {
    if (s.owner == rank) mine.push_back(s);
  }
  return mine;
}

std::string ShmPlan::formula() const {
  std::ostringstream out;
  out << local_ranks << " local ranks x " << (local_ranks - 1) << " peer" << (local_ranks == 2 ? "" : "s")
      << " x " << channels << " channel" << (channels == 1 ? "" : "s") << " x " << segment_bytes
      << " B = " << total_bytes() << " B (" << mib(total_bytes()) << ")";
  return out.str();
}

ShmPlan plan(int local_ranks, int channels, uint64_t segment_bytes) {
  ShmPlan p;
  p.local_ranks = local_ranks;
  p.channels = channels;
  p.segment_bytes = segment_bytes;
  for (int owner = 0; owner < local_ranks; ++owner) {
    for (int peer = 0; peer < local_ranks; ++peer) {
      if (peer == owner) continue;
      for (int c = 0; c < channels; ++c) p.segments.push_back({owner, peer, c});
    }
  }
  return p;
}

ShmSpace space_of(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) {
    throw UsageError("cannot read the file system of " + path + ": " + std::strerror(errno));
  }
  ShmSpace space;
  space.path = path;
  space.size_bytes = static_cast<uint64_t>(fs.f_blocks) * fs.f_bsize;
  space.free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_bsize;
  space.is_tmpfs = fs.f_type == TMPFS_MAGIC;
  return space;
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::vector<std::string> fixes(uint64_t needed) {
  // Advice in whole GiB above the need, so a copied command leaves headroom for proxy pools.
  const uint64_t gib = (needed + (1ULL << 30) - 1) >> 30;
  const std::string size = std::to_string(gib + 1) + "g";
  return {
      "docker run --shm-size=" + size + " (or --ipc=host) gives the container's /dev/shm room",
      "Kubernetes: mount an emptyDir {medium: Memory, sizeLimit: " + std::to_string(gib + 1) +
          "Gi} at /dev/shm",
      "NCCL_SHM_DISABLE=1 sends same-node traffic over the network transport instead (IB or "
      "sockets): no /dev/shm, but slower intra-node bandwidth",
      "NCCL >= 2.19.1 reserves segments with fallocate(): the same shortage becomes a clean "
      "'failed to extend /dev/shm/nccl-... No space left on device' error instead of SIGBUS; "
      "2.12.7-2.18.x crash with SIGBUS",
  };
}

}  // namespace ddx::shm
