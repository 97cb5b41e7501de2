#include "data/byte_level.h"

#include <vector>

#include "data/utf8.h"

namespace ddx::data::byte_level {
namespace {

// Bytes that are printable Latin-1 characters ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves; the other 68 bytes get 256, 257, ... in byte order.
struct Tables {
  std::array<uint32_t, 256> char_of{};
  std::array<int16_t, 512> byte_of{};  // every mapped code point is < 256 + 68
  Tables() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of[b] = printable ? static_cast<uint32_t>(b) : next++;
      byte_of[char_of[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t char_of_byte(uint8_t b) { return tables().char_of[b]; }

int byte_of_char(uint32_t cp) { return cp < 512 ? tables().byte_of[cp] : -1; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, char_of_byte(static_cast<uint8_t>(c)));
  return out;
}

std::string decode(std::string_view spelled) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  utf8::decode(spelled, cps, offsets);
  std::string out;
  out.reserve(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    const int b = byte_of_char(cps[i]);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(spelled.substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
  }
  return out;
}

}  // namespace ddx::data::byte_level
