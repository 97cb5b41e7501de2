// A pickle encoder for plain data: the protocol-2 opcodes every unpickler knows, no memo (each
// value is written once) and no classes, so the file is safe to load anywhere.
#include "pickle_writer.h"

#include <cstdint>
#include <cstring>

namespace ddx {
namespace {

// Opcodes (Python's Lib/pickletools.py names them).
constexpr char kProto = '\x80', kStop = '.', kMark = '(', kNone = 'N', kTrue = '\x88', kFalse = '\x89';
constexpr char kBinInt = 'J', kLong1 = '\x8a', kBinFloat = 'G', kBinUnicode = 'X';
constexpr char kEmptyDict = '}', kSetItems = 'u', kEmptyList = ']', kAppends = 'e';

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_int(std::string& out, int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out.push_back(kBinInt);
    put_le(out, static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    return;
  }
  out.push_back(kLong1);  // little-endian two's complement, 8 bytes always suffice
  out.push_back(8);
  put_le(out, static_cast<uint64_t>(v), 8);
}

void put_string(std::string& out, const std::string& s) {
  out.push_back(kBinUnicode);
  put_le(out, s.size(), 4);
  out += s;
}

void put_value(std::string& out, const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      out.push_back(kNone);
      return;
    case nlohmann::json::value_t::boolean:
      out.push_back(v.get<bool>() ? kTrue : kFalse);
      return;
    case nlohmann::json::value_t::number_integer:
      put_int(out, v.get<int64_t>());
      return;
    case nlohmann::json::value_t::number_unsigned:
      put_int(out, static_cast<int64_t>(v.get<uint64_t>()));
      return;
    case nlohmann::json::value_t::number_float: {
      out.push_back(kBinFloat);  // big-endian IEEE double
      const double d = v.get<double>();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
      return;
    }
    case nlohmann::json::value_t::string:
      put_string(out, v.get_ref<const std::string&>());
      return;
    case nlohmann::json::value_t::array:
      out.push_back(kEmptyList);
      if (v.empty()) return;
      out.push_back(kMark);
      for (const auto& item : v) put_value(out, item);
      out.push_back(kAppends);
      return;
    case nlohmann::json::value_t::object:
      out.push_back(kEmptyDict);
      if (v.empty()) return;
      out.push_back(kMark);
      for (const auto& [key, item] : v.items()) {
        put_string(out, key);
        put_value(out, item);
      }
      out.push_back(kSetItems);
      return;
    case nlohmann::json::value_t::binary:
      out.push_back(kNone);
      return;
  }
}

}  // namespace

std::string to_pickle(const nlohmann::ordered_json& value) {
  std::string out;
  out.push_back(kProto);
  out.push_back(2);
  put_value(out, value);
  out.push_back(kStop);
  return out;
}

}  // namespace ddx
