#include "data/utf8.h"

#include <algorithm>

#include "ddx/errors/errors.h"

namespace ddx::data::utf8 {
namespace {

// Length of the valid sequence starting at p (0 if invalid), and its code point.
size_t decode_one(const unsigned char* p, size_t left, uint32_t& cp) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t len;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = b0 & 0x07;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF where a sequence must start
  }
  if (left < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

size_t first_invalid_offset(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {  // ASCII runs dominate real data
      ++i;
      continue;
    }
    uint32_t cp;
    const size_t len = decode_one(p + i, n - i, cp);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void decode(std::string_view text, std::vector<uint32_t>& code_points, std::vector<size_t>& offsets) {
  code_points.clear();
  offsets.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    uint32_t cp;
    size_t len = decode_one(p + i, n - i, cp);
    if (len == 0) {  // not reached for validated text; map the byte to U+FFFD and move on
      cp = 0xFFFD;
      len = 1;
    }
    code_points.push_back(cp);
    offsets.push_back(i);
    i += len;
  }
  offsets.push_back(n);
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void require_valid(std::string_view text, const std::string& what) {
  const size_t bad = first_invalid_offset(text);
  if (bad == std::string_view::npos) return;
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + bad, '\n'));
  throw UsageError(what + ": invalid UTF-8 at byte offset " + std::to_string(bad) + " (line " +
                   std::to_string(line) + "); ddx reads text as UTF-8");
}

}  // namespace ddx::data::utf8
