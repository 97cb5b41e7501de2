#include "data/unicode_classes.h"

#include <algorithm>

namespace ddx::data::unicode {
namespace {

bool in_ranges(const CodePointRange* ranges, size_t count, uint32_t cp) {
  // First range whose last >= cp; cp is inside it iff first <= cp.
  const CodePointRange* end = ranges + count;
  const CodePointRange* it =
      std::lower_bound(ranges, end, cp, [](const CodePointRange& r, uint32_t c) { return r.last < c; });
  return it != end && it->first <= cp;
}

}  // namespace

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';  // ASCII fast path
  return in_ranges(kLetterRanges, kLetterRanges_count, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumberRanges, kNumberRanges_count, cp);
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace ddx::data::unicode
