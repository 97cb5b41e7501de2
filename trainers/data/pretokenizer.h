#pragma once
// Hand-written equivalents of the pre-tokenizer regexes of byte-level BPE tokenizers. The Rust
// `tokenizers` library runs them with Oniguruma; std::regex has no \p{L}/\p{N}, so each pattern
// is implemented as its alternation tried in order at each position, with the same greedy and
// backtracking outcome (derivations in pretokenizer.cpp). Internal to ddx_data.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddx::data {

enum class SplitPattern {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // As Llama3 with \p{N} (single digits) instead of \p{N}{1,3} (Qwen2 and relatives).
  Llama3SingleDigits,
};

// The pattern a tokenizer.json regex string denotes, if it is one of the above (exact text).
std::optional<SplitPattern> split_pattern_from_regex(const std::string& regex);
const char* split_pattern_regex(SplitPattern pattern);

// Byte ranges [begin, end) of `text` (valid UTF-8) that the pattern's successive matches cover,
// i.e. what a Split with behaviour "Isolated" yields. Text between matches (there is none for
// these patterns, since every character starts some alternative) would also become a piece.
void split_by_pattern(SplitPattern pattern, std::string_view text,
                      std::vector<std::pair<size_t, size_t>>& pieces);

}  // namespace ddx::data
