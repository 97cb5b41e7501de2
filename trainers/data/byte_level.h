#pragma once
// GPT-2's reversible byte <-> character mapping: byte-level BPE vocabularies spell every byte
// as a printable character (space is "Ġ", newline "Ċ") so tokens are readable strings.
// Internal to ddx_data.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ddx::data::byte_level {

// Code point that stands for byte b.
uint32_t char_of_byte(uint8_t b);
// Byte that code point cp stands for, or -1 when cp is not one of the 256 characters.
int byte_of_char(uint32_t cp);

// The vocabulary spelling of raw bytes ("Hello world" -> "HelloĠworld").
std::string encode(std::string_view bytes);
// The raw bytes a vocabulary spelling stands for; characters outside the mapping are copied
// through unchanged (added tokens are stored verbatim).
std::string decode(std::string_view spelled);

}  // namespace ddx::data::byte_level
