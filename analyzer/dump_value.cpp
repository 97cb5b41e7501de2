// DumpValue over nlohmann's JSON: PyTorch's JSON dumps (_dump_fr_trace_json) and the tests'.
#include "analyzer/dump_value.h"

#include <nlohmann/json.hpp>

namespace ddx::analyze {
namespace {

using nlohmann::json;

const json& node(const void* p) { return *static_cast<const json*>(p); }

DumpValue::Kind kind_of(const void* p) {
  switch (node(p).type()) {
    case json::value_t::null: return DumpValue::Kind::Null;
    case json::value_t::boolean: return DumpValue::Kind::Bool;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return DumpValue::Kind::Int;
    case json::value_t::number_float: return DumpValue::Kind::Double;
    case json::value_t::string: return DumpValue::Kind::String;
    case json::value_t::array: return DumpValue::Kind::List;
    case json::value_t::object: return DumpValue::Kind::Dict;
    default: return DumpValue::Kind::Other;
  }
}

const DumpValue::Decoder kJsonDecoder = {
    kind_of,
    [](const void* p) { return node(p).get<bool>(); },
    [](const void* p) { return node(p).get<int64_t>(); },
    [](const void* p) { return node(p).get<double>(); },
    [](const void* p) -> const std::string& { return node(p).get_ref<const std::string&>(); },
    [](const void* p) { return node(p).size(); },
    [](const void* p, size_t i) -> const void* { return &node(p)[i]; },
    [](const void* p, const char* key) -> const void* {
      auto it = node(p).find(key);
      return it == node(p).end() ? nullptr : &*it;
    },
    [](const void* p, void* context, void (*visit)(void*, const void*, const void*)) {
      // nlohmann keeps an object's keys as std::string, not as JSON: each goes out as a JSON
      // string made for the call.
      for (const auto& [key, value] : node(p).items()) {
        const json key_node = key;
        visit(context, &key_node, &value);
      }
    },
    [](const void*) -> const void* { return nullptr; },  // JSON shares nothing: every object is its own
};

}  // namespace

std::string text_of(const DumpValue& value) {
  switch (value.kind()) {
    case DumpValue::Kind::String: return value.as_string();
    case DumpValue::Kind::Int: return std::to_string(value.as_int());
    case DumpValue::Kind::Double: return std::to_string(value.as_double());
    case DumpValue::Kind::Bool: return value.as_bool() ? "True" : "False";
    default: return "";
  }
}

DictFields::DictFields(std::vector<const char*> keys) : keys_(std::move(keys)), values_(keys_.size()) {}

int DictFields::slot_of(const DumpValue& key) {
  const void* id = key.identity();
  if (id) {
    auto known = slot_by_identity_.find(id);
    if (known != slot_by_identity_.end()) return known->second;
  }
  int slot = -1;
  if (key.is_string()) {
    const std::string& text = key.as_string();
    for (size_t i = 0; i < keys_.size() && slot < 0; ++i) {
      if (text == keys_[i]) slot = static_cast<int>(i);
    }
  }
  if (id) slot_by_identity_.emplace(id, slot);
  return slot;
}

const std::vector<DumpValue>& DictFields::read(const DumpValue& dict) {
  values_.assign(keys_.size(), DumpValue());
  dict.for_each_item([&](const DumpValue& key, const DumpValue& value) {
    const int slot = slot_of(key);
    if (slot >= 0) values_[slot] = value;
  });
  return values_;
}

DumpValue json_value(const json& doc) { return DumpValue(&kJsonDecoder, &doc); }

}  // namespace ddx::analyze
