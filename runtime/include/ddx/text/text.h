#pragma once
// Small formatting helpers shared by reports and error messages.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddx {

// printf into a std::string (any length), for the fixed-width rows of reports.
std::string printf_text(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Whether `text` begins / ends with `affix`.
inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
inline bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// "[4, 1024]"
std::string shape_text(const std::vector<int64_t>& shape);
// "rank 3" or "ranks 0,2,5"
std::string ranks_text(const std::vector<int>& ranks);
// "a, b, c"
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");
// A command prefix as the user typed it in one flag ("srun -N 2 --ntasks-per-node 2"), split
// on whitespace (no shell quoting: a prefix is words).
std::vector<std::string> split_words(const std::string& text);
// The candidate `word` was most likely a typo of: the closest by edit distance (an adjacent
// swap counts as one edit), when at most a third of the word's letters (at least one) differ;
// "" when nothing is that close. Ties go to the earlier candidate.
std::string nearest_spelling(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace ddx
