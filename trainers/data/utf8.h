#pragma once
// Strict UTF-8 decoding (no overlongs, no surrogates, nothing above U+10FFFF). Internal to
// ddx_data.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddx::data::utf8 {

// Byte offset of the first invalid sequence, or npos when `text` is valid UTF-8.
size_t first_invalid_offset(std::string_view text);

// Decodes valid UTF-8 (callers validate first); also returns each code point's byte offset so
// pieces can be cut from the original bytes. offsets has one extra entry: text.size().
void decode(std::string_view text, std::vector<uint32_t>& code_points, std::vector<size_t>& offsets);

void append(std::string& out, uint32_t cp);

// Throws ddx::UsageError "<what>: invalid UTF-8 at byte offset N (line L)" when invalid.
void require_valid(std::string_view text, const std::string& what);

}  // namespace ddx::data::utf8
