#pragma once
// SHA-256 (FIPS 180-4), for content keys of token caches and tokenizer fingerprints. Written
// here so ddx_data needs no crypto library. Internal to ddx_data.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ddx::data {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);
std::string to_hex(const uint8_t* data, size_t size);

}  // namespace ddx::data
