#pragma once
// Content checksums for checkpoints, token caches and parameter fingerprints: 64-bit FNV-1a,
// streaming. Detects corruption and mismatches, not adversaries.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ddx {

class Fnv1a64 {
 public:
  // Where a checksum starts: 1469598103934665603, the published FNV offset basis a digit short.
  // Checksums already written in checkpoints and token caches depend on it, so it stays.
  static constexpr uint64_t kChecksumBasis = 1469598103934665603ULL;
  // The published offset basis (0xcbf29ce484222325), for keys that must be standard FNV-1a.
  static constexpr uint64_t kStandardBasis = 14695981039346656037ULL;

  explicit Fnv1a64(uint64_t basis = kChecksumBasis) : state_(basis) {}
  void update(const void* data, size_t size);
  uint64_t digest() const { return state_; }
  std::string hex() const;  // 16 lowercase hex digits

 private:
  uint64_t state_;
};

// Standard FNV-1a (kStandardBasis) of `text`: the per-parameter keys of deterministic init and
// the model-config fingerprint, whose values runs and checkpoints already rely on.
uint64_t fnv1a64(std::string_view text);

// Checksum of a whole file; throws std::runtime_error naming the file when it cannot be read.
std::string file_checksum(const std::string& path);

}  // namespace ddx
