// DumpValue over LibTorch's unpickled IValues: PyTorch's pickled flight recorder dumps, read in
// place. Each decoded dump is a few thousand dicts; reading them where they lie instead of
// copying them into JSON first is most of what makes a thousand dumps quick to read.
#include "analyzer/pickle_value.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <stdexcept>
#include <unordered_map>

namespace ddx::analyze {
namespace {

const c10::IValue& node(const void* p) { return *static_cast<const c10::IValue*>(p); }

DumpValue::Kind kind_of(const void* p) {
  const c10::IValue& v = node(p);
  if (v.isNone()) return DumpValue::Kind::Null;
  if (v.isBool()) return DumpValue::Kind::Bool;
  if (v.isInt()) return DumpValue::Kind::Int;
  if (v.isDouble()) return DumpValue::Kind::Double;
  if (v.isString()) return DumpValue::Kind::String;
  if (v.isList() || v.isTuple()) return DumpValue::Kind::List;
  if (v.isGenericDict()) return DumpValue::Kind::Dict;
  return DumpValue::Kind::Other;
}

size_t size_of(const void* p) {
  const c10::IValue& v = node(p);
  if (v.isList()) return v.toListRef().size();
  if (v.isTuple()) return v.toTupleRef().elements().size();
  return v.toGenericDict().size();
}

const void* item_at(const void* p, size_t i) {
  const c10::IValue& v = node(p);
  return v.isList() ? &v.toListRef()[i] : &v.toTupleRef().elements()[i];
}

// The key as the dicts hold it. Looking a key up takes an IValue; a dump's 2,000 entries are
// looked up by the same twenty literals, so each literal's IValue is made once per thread and
// found again by the literal's address (a literal's text never changes).
const c10::IValue& key_value(const char* key) {
  thread_local std::unordered_map<const char*, c10::IValue> made;
  auto it = made.find(key);
  if (it == made.end()) it = made.emplace(key, c10::IValue(std::string(key))).first;
  return it->second;
}

const void* find_in(const void* p, const char* key) {
  const auto dict = node(p).toGenericDict();
  auto it = dict.find(key_value(key));
  return it == dict.end() ? nullptr : &it->value();
}

void for_each_in(const void* p, void* context, void (*visit)(void*, const void*, const void*)) {
  for (const auto& item : node(p).toGenericDict()) visit(context, &item.key(), &item.value());
}

const DumpValue::Decoder kIValueDecoder = {
    kind_of,
    [](const void* p) { return node(p).toBool(); },
    [](const void* p) { return node(p).toInt(); },
    [](const void* p) { return node(p).toDouble(); },
    [](const void* p) -> const std::string& { return node(p).toStringRef(); },
    size_of,
    item_at,
    find_in,
    for_each_in,
    // The pickler memoizes a shared dict, list or string once and the unpickler hands every
    // reference the same object.
    [](const void* p) -> const void* {
      const c10::IValue& v = node(p);
      return v.isGenericDict() || v.isList() || v.isTuple() || v.isString() ? v.internalToPointer() : nullptr;
    },
};

std::string one_line(std::string text) {
  const size_t end = text.find('\n');
  if (end != std::string::npos) text.resize(end);
  return text;
}

}  // namespace

bool looks_like_pickle(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 && bytes[1] >= 2 && bytes[1] <= 5;
}

void read_pickle(const std::string& bytes, const std::function<void(const DumpValue& root)>& read) {
  c10::IValue value;
  try {
    value = torch::jit::unpickle(bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    throw std::runtime_error("not a readable pickle (" + one_line(e.what_without_backtrace()) + ")");
  } catch (const std::exception& e) {
    throw std::runtime_error("not a readable pickle (" + one_line(e.what()) + ")");
  }
  read(DumpValue(&kIValueDecoder, &value));
}

}  // namespace ddx::analyze
