#pragma once
// Content checksums for checkpoints, token caches and parameter fingerprints: 64-bit FNV-1a,
// streaming. Detects corruption and mismatches, not adversaries.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddx {

class Fnv1a64 {
 public:
  void update(const void* data, size_t size);
  uint64_t digest() const { return state_; }
  std::string hex() const;  // 16 lowercase hex digits

 private:
  uint64_t state_ = 1469598103934665603ULL;
};

// Checksum of a whole file; throws std::runtime_error naming the file when it cannot be read.
std::string file_checksum(const std::string& path);

}  // namespace ddx
