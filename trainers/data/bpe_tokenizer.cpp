#include "data/bpe_tokenizer.h"

#include <algorithm>

#include "data/byte_level.h"
#include "data/unicode_classes.h"
#include "data/utf8.h"
#include "ddx/errors/errors.h"

namespace ddx::data {
namespace {

// Code point ending just before byte offset `end` (valid UTF-8), and where it starts.
uint32_t code_point_before(std::string_view s, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  utf8::decode(s.substr(start, end - start), cps, offsets);
  return cps.empty() ? 0 : cps[0];
}

uint32_t code_point_at(std::string_view s, size_t begin, size_t& end) {
  end = begin + 1;
  while (end < s.size() && (static_cast<uint8_t>(s[end]) & 0xC0) == 0x80) ++end;
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  utf8::decode(s.substr(begin, end - begin), cps, offsets);
  return cps.empty() ? 0 : cps[0];
}

bool is_word_char(uint32_t cp) { return cp == '_' || unicode::is_letter(cp) || unicode::is_number(cp); }

}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerSpec spec) : spec_(std::move(spec)) {
  int32_t max_id = -1;
  for (const auto& [tok, id] : spec_.model->vocab()) max_id = std::max(max_id, id);
  for (const auto& a : spec_.added_tokens) max_id = std::max(max_id, a.id);
  spelling_.assign(static_cast<size_t>(max_id + 1), std::string());
  decode_kind_.assign(spelling_.size(), 0);
  for (const auto& [tok, id] : spec_.model->vocab()) {
    spelling_[id] = tok;
    // "<0xAB>" byte-fallback tokens decode to their byte.
    if (tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>') decode_kind_[id] = 2;
  }
  for (const auto& a : spec_.added_tokens) {
    spelling_[a.id] = a.content;
    decode_kind_[a.id] = 1;
    if (!a.content.empty()) added_by_first_byte_[static_cast<uint8_t>(a.content[0])].push_back(&a);
  }
  for (auto& list : added_by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [](const AddedToken* x, const AddedToken* y) { return x->content.size() > y->content.size(); });
  }
}

// Leftmost-longest, non-overlapping occurrences of added tokens, as the Rust library's
// Aho-Corasick pass finds them, with single_word / lstrip / rstrip applied.
std::vector<BpeTokenizer::Match> BpeTokenizer::find_added_tokens(const std::string& text) const {
  std::vector<Match> found;
  if (spec_.added_tokens.empty()) return found;
  size_t prev_end = 0;
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const AddedToken* a : added_by_first_byte_[static_cast<uint8_t>(text[i])]) {
      if (text.compare(i, a->content.size(), a->content) == 0) {
        hit = a;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + hit->content.size();
    if (hit->single_word) {
      size_t s, e;
      const bool word_before = begin > 0 && is_word_char(code_point_before(text, begin, s));
      const bool word_after = end < text.size() && is_word_char(code_point_at(text, end, e));
      if (word_before || word_after) {
        ++i;
        continue;
      }
    }
    if (hit->lstrip) {
      while (begin > prev_end) {
        size_t s;
        if (!unicode::is_whitespace(code_point_before(text, begin, s))) break;
        begin = s;
      }
    }
    if (hit->rstrip) {
      while (end < text.size()) {
        size_t e;
        if (!unicode::is_whitespace(code_point_at(text, end, e))) break;
        end = e;
      }
    }
    found.push_back({begin, end, hit->id});
    prev_end = end;
    i = end;
  }
  return found;
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<std::string> pieces{std::string(text)};
  std::vector<std::string> next;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const PreTokenizerStep& step : spec_.steps) {
    next.clear();
    for (std::string& piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::ByteLevel && step.add_prefix_space &&
          (piece.empty() || piece[0] != ' ')) {
        piece.insert(piece.begin(), ' ');
      }
      const bool split = step.kind == PreTokenizerStep::Kind::Split || step.use_regex;
      if (!split) {
        next.push_back(std::move(piece));
        continue;
      }
      const SplitPattern pattern =
          step.kind == PreTokenizerStep::Kind::Split ? step.pattern : SplitPattern::Gpt2;
      ranges.clear();
      split_by_pattern(pattern, piece, ranges);
      for (const auto& [b, e] : ranges) next.push_back(piece.substr(b, e - b));
    }
    pieces.swap(next);
  }
  for (const std::string& piece : pieces) spec_.model->encode_piece(piece, out);
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  size_t pos = 0;
  for (const Match& m : find_added_tokens(text)) {
    encode_ordinary(std::string_view(text).substr(pos, m.begin - pos), out);
    out.push_back(m.id);
    pos = m.end;
  }
  encode_ordinary(std::string_view(text).substr(pos), out);
  return out;
}

std::vector<int32_t> BpeTokenizer::encode_document(const std::string& text) const {
  std::vector<int32_t> out(spec_.template_prefix);
  const std::vector<int32_t> body = encode(text);
  out.insert(out.end(), body.begin(), body.end());
  out.insert(out.end(), spec_.template_suffix.begin(), spec_.template_suffix.end());
  if (spec_.eos_id >= 0 && (spec_.template_suffix.empty() || spec_.template_suffix.back() != spec_.eos_id)) {
    out.push_back(spec_.eos_id);
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string spelled_run;  // consecutive byte-level spellings, decoded together
  std::string out;
  auto flush = [&] {
    out += byte_level::decode(spelled_run);
    spelled_run.clear();
  };
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= spelling_.size()) {
      throw UsageError("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                       std::to_string(spelling_.size()) + ")");
    }
    switch (decode_kind_[id]) {
      case 0:
        spelled_run += spelling_[id];
        break;
      case 1:
        flush();
        out += spelling_[id];
        break;
      default:
        flush();
        out.push_back(static_cast<char>(std::stoi(spelling_[id].substr(3, 2), nullptr, 16)));
        break;
    }
  }
  flush();
  return out;
}

}  // namespace ddx::data
