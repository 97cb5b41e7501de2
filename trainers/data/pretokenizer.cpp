#include "data/pretokenizer.h"

#include <cstdint>

#include "data/unicode_classes.h"
#include "data/utf8.h"

namespace ddx::data {
namespace {

constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3SingleDigitsRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Every code point is in exactly one of these; "Other" is [^\s\p{L}\p{N}].
enum class Cls : uint8_t { Letter, Number, Space, Other };

Cls classify(uint32_t cp) {
  if (unicode::is_letter(cp)) return Cls::Letter;
  if (unicode::is_number(cp)) return Cls::Number;
  if (unicode::is_whitespace(cp)) return Cls::Space;
  return Cls::Other;
}

struct Text {
  std::vector<uint32_t> cps;
  std::vector<Cls> cls;
  size_t n = 0;

  size_t run_end(size_t i, Cls c) const {
    while (i < n && cls[i] == c) ++i;
    return i;
  }
  bool is_cr_lf(size_t i) const { return cps[i] == '\r' || cps[i] == '\n'; }
};

// Oniguruma's (?i) folds U+017F (long s) to 's'; the other letters of the contractions have no
// single-code-point folds besides their ASCII cases.
uint32_t fold(uint32_t cp, bool ignore_case) {
  if (!ignore_case) return cp;
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp == 0x17F) return 's';
  return cp;
}

// 's|'t|'re|'ve|'m|'ll|'d : the alternatives start with distinct letters, so order is moot.
size_t match_contraction(const Text& t, size_t i, bool ignore_case) {
  if (t.cps[i] != '\'' || i + 1 >= t.n) return 0;
  const uint32_t a = fold(t.cps[i + 1], ignore_case);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= t.n) return 0;
  const uint32_t b = fold(t.cps[i + 2], ignore_case);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s*[\r\n]+ : \s* first takes the whole whitespace run, then gives characters back until
// [\r\n]+ can match; the match therefore ends just after the run's last CR or LF.
size_t match_space_then_newlines(const Text& t, size_t i) {
  const size_t j = t.run_end(i, Cls::Space);
  for (size_t k = j; k > i; --k) {
    if (t.is_cr_lf(k - 1)) return k - i;
  }
  return 0;
}

// \s+(?!\S)|\s+ : the run up to the end of text, or the run minus its last character when a
// non-space follows (that character then prefixes the next word), or a single space.
size_t match_trailing_space(const Text& t, size_t i) {
  const size_t j = t.run_end(i, Cls::Space);
  if (j == t.n || j - i == 1) return j - i;
  return j - 1 - i;
}

// ' ?X+' for a class X: with the optional space when a space is followed by X.
size_t match_optional_space_run(const Text& t, size_t i, Cls c) {
  if (t.cps[i] == ' ' && i + 1 < t.n && t.cls[i + 1] == c) return t.run_end(i + 1, c) - i;
  if (t.cls[i] == c) return t.run_end(i, c) - i;
  return 0;
}

size_t match_gpt2(const Text& t, size_t i) {
  if (size_t m = match_contraction(t, i, false)) return m;
  for (Cls c : {Cls::Letter, Cls::Number, Cls::Other}) {
    if (size_t m = match_optional_space_run(t, i, c)) return m;
  }
  return match_trailing_space(t, i);  // only whitespace is left
}

size_t match_llama3(const Text& t, size_t i, size_t max_digits) {
  if (size_t m = match_contraction(t, i, true)) return m;
  // [^\r\n\p{L}\p{N}]?\p{L}+ : one leading non-letter, non-number, non-newline character is
  // taken when letters follow it.
  const Cls c = t.cls[i];
  if (c != Cls::Letter && c != Cls::Number && !t.is_cr_lf(i) && i + 1 < t.n && t.cls[i + 1] == Cls::Letter) {
    return t.run_end(i + 1, Cls::Letter) - i;
  }
  if (c == Cls::Letter) return t.run_end(i, Cls::Letter) - i;
  // \p{N}{1,3}
  if (c == Cls::Number) {
    size_t j = i;
    while (j < t.n && j - i < max_digits && t.cls[j] == Cls::Number) ++j;
    return j - i;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  if (size_t m = match_optional_space_run(t, i, Cls::Other)) {
    size_t j = i + m;
    while (j < t.n && t.is_cr_lf(j)) ++j;
    return j - i;
  }
  // Only whitespace is left.
  if (size_t m = match_space_then_newlines(t, i)) return m;
  return match_trailing_space(t, i);
}

}  // namespace

std::optional<SplitPattern> split_pattern_from_regex(const std::string& regex) {
  if (regex == kGpt2Regex) return SplitPattern::Gpt2;
  if (regex == kLlama3Regex) return SplitPattern::Llama3;
  if (regex == kLlama3SingleDigitsRegex) return SplitPattern::Llama3SingleDigits;
  return std::nullopt;
}

const char* split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::Gpt2: return kGpt2Regex;
    case SplitPattern::Llama3: return kLlama3Regex;
    case SplitPattern::Llama3SingleDigits: return kLlama3SingleDigitsRegex;
  }
  return "";
}

void split_by_pattern(SplitPattern pattern, std::string_view text,
                      std::vector<std::pair<size_t, size_t>>& pieces) {
  // thread_local scratch: encode() runs on several threads while a dataset is tokenised.
  thread_local Text t;
  thread_local std::vector<size_t> offsets;
  utf8::decode(text, t.cps, offsets);
  t.n = t.cps.size();
  t.cls.resize(t.n);
  for (size_t i = 0; i < t.n; ++i) t.cls[i] = classify(t.cps[i]);

  size_t i = 0;
  while (i < t.n) {
    size_t m = 0;
    switch (pattern) {
      case SplitPattern::Gpt2: m = match_gpt2(t, i); break;
      case SplitPattern::Llama3: m = match_llama3(t, i, 3); break;
      case SplitPattern::Llama3SingleDigits: m = match_llama3(t, i, 1); break;
    }
    if (m == 0) m = 1;  // unreachable for these patterns; keeps the loop total
    pieces.emplace_back(offsets[i], offsets[i + m]);
    i += m;
  }
}

}  // namespace ddx::data
