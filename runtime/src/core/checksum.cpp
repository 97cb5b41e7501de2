#include "ddx/checksum.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace ddx {

void Fnv1a64::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = state_;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  state_ = h;
}

uint64_t fnv1a64(std::string_view text) {
  Fnv1a64 h(Fnv1a64::kStandardBasis);
  h.update(text.data(), text.size());
  return h.digest();
}

std::string Fnv1a64::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(state_));
  return buf;
}

std::string file_checksum(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  Fnv1a64 h;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(buf.data(), n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw std::runtime_error("error reading " + path);
  return h.hex();
}

}  // namespace ddx
