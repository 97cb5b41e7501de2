#pragma once
// The three character classes the GPT-2 and Llama-3 pre-tokenizer regexes need: \p{L}, \p{N}
// and \s. std::regex cannot express \p{..}, so the pre-tokenizers are written by hand on top of
// these. Internal to ddx_data.
#include <cstddef>
#include <cstdint>

namespace ddx::data::unicode {

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// Generated tables (unicode_tables.cpp, from Python's unicodedata; see gen_unicode_tables.py).
extern const CodePointRange kLetterRanges[];
extern const size_t kLetterRanges_count;
extern const CodePointRange kNumberRanges[];
extern const size_t kNumberRanges_count;

// General category L* (Lu, Ll, Lt, Lm, Lo).
bool is_letter(uint32_t cp);
// General category N* (Nd, Nl, No).
bool is_number(uint32_t cp);
// Oniguruma's \s for Unicode text (what the Rust tokenizers' regexes use): \t \n \v \f \r,
// U+0085, and the separators Zs, Zl, Zp.
bool is_whitespace(uint32_t cp);

}  // namespace ddx::data::unicode
