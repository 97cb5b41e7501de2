#include "analyzer/pickle_json.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <stdexcept>

namespace ddx::analyze {
namespace {

using nlohmann::json;

// Deep enough for any flight recorder dump (dict > list > entry > frames > frame); a deeper
// pickle is not a dump, and a bound keeps a crafted one from exhausting the stack.
constexpr int kMaxDepth = 32;

std::string key_text(const c10::IValue& key) {
  if (key.isString()) return key.toStringRef();
  if (key.isInt()) return std::to_string(key.toInt());
  if (key.isBool()) return key.toBool() ? "True" : "False";
  if (key.isDouble()) return std::to_string(key.toDouble());
  throw std::runtime_error("a dict key of type " + key.tagKind() + " in the pickle");
}

json to_json(const c10::IValue& v, int depth) {
  if (depth > kMaxDepth) throw std::runtime_error("nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (v.isNone()) return nullptr;
  if (v.isBool()) return v.toBool();
  if (v.isInt()) return v.toInt();
  if (v.isDouble()) return v.toDouble();
  if (v.isString()) return v.toStringRef();
  if (v.isList()) {
    json out = json::array();
    for (const c10::IValue& item : v.toListRef()) out.push_back(to_json(item, depth + 1));
    return out;
  }
  if (v.isTuple()) {
    json out = json::array();
    for (const c10::IValue& item : v.toTupleRef().elements()) out.push_back(to_json(item, depth + 1));
    return out;
  }
  if (v.isGenericDict()) {
    json out = json::object();
    for (const auto& item : v.toGenericDict()) out[key_text(item.key())] = to_json(item.value(), depth + 1);
    return out;
  }
  throw std::runtime_error("a value of type " + v.tagKind() + " in the pickle");
}

std::string one_line(std::string text) {
  const size_t end = text.find('\n');
  if (end != std::string::npos) text.resize(end);
  return text;
}

}  // namespace

bool looks_like_pickle(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 && bytes[1] >= 2 && bytes[1] <= 5;
}

json pickle_to_json(const std::string& bytes) {
  c10::IValue value;
  try {
    value = torch::jit::unpickle(bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    throw std::runtime_error("not a readable pickle (" + one_line(e.what_without_backtrace()) + ")");
  } catch (const std::exception& e) {
    throw std::runtime_error("not a readable pickle (" + one_line(e.what()) + ")");
  }
  return to_json(value, 0);
}

}  // namespace ddx::analyze
