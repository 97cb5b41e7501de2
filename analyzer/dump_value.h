#pragma once
// A decoded dump as a read-only tree, whichever decoder produced it: nlohmann's JSON (PyTorch's
// JSON dumps) or LibTorch's unpickled IValues (its pickles: pickle_value.h). The PyTorch dump
// reader walks this view, so one reader serves both formats and a pickle is read straight from
// its IValues, not copied into JSON first: at 1,024 dumps that copy and its frees were half the
// analysis time.
//
// A view is the decoder's table of functions, its node and the node's kind, and costs nothing
// to copy. It is valid while the decoded document lives. An absent key or index gives an empty
// view, which reads as null.
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddx::analyze {

class DumpValue {
 public:
  enum class Kind { Null, Bool, Int, Double, String, List, Dict, Other };

  // What a decoder supplies: one table of functions over its own nodes. Each is called only on
  // a node of the kind it reads (lists: size and at; dicts: size, find and for_each).
  struct Decoder {
    Kind (*kind)(const void* node);
    bool (*to_bool)(const void* node);
    int64_t (*to_int)(const void* node);
    double (*to_double)(const void* node);
    const std::string& (*to_string)(const void* node);
    size_t (*size)(const void* node);
    const void* (*at)(const void* list, size_t i);
    // `key` is a string literal: a decoder may remember it by its address.
    const void* (*find)(const void* dict, const char* key);
    void (*for_each)(const void* dict, void* context, void (*visit)(void* context, const void* key, const void* value));
    // The object behind the node where the format shares one object between places (PyTorch
    // pickles each Python frame and each key once and refers to it from every entry that holds
    // it); nullptr where the decoder cannot tell.
    const void* (*identity)(const void* node);
  };

  DumpValue() = default;
  DumpValue(const Decoder* decoder, const void* node)
      : decoder_(decoder), node_(node), kind_(node ? decoder->kind(node) : Kind::Null) {}

  Kind kind() const { return kind_; }
  bool is_null() const { return kind() == Kind::Null; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_number() const { return kind() == Kind::Int || kind() == Kind::Double; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }

  // Each conversion only for its kind (check first).
  bool as_bool() const { return decoder_->to_bool(node_); }
  int64_t as_int() const { return decoder_->to_int(node_); }
  double as_double() const { return decoder_->to_double(node_); }
  const std::string& as_string() const { return decoder_->to_string(node_); }

  // Lists (and tuples): their length and items; 0 and empty views for anything else.
  size_t size() const { return is_list() || is_dict() ? decoder_->size(node_) : 0; }
  DumpValue operator[](size_t i) const {
    return is_list() && i < decoder_->size(node_) ? DumpValue(decoder_, decoder_->at(node_, i)) : DumpValue();
  }

  // A dict's value under `key` (a string literal), or an empty view.
  DumpValue get(const char* key) const { return is_dict() ? DumpValue(decoder_, decoder_->find(node_, key)) : DumpValue(); }
  bool has(const char* key) const { return !get(key).is_null(); }

  // Calls visit(key, value) for each item of a dict, in the dict's order.
  template <class Visit>
  void for_each_item(Visit&& visit) const {
    if (!is_dict()) return;
    struct Context {
      Visit* visit;
      const Decoder* decoder;
    } context{&visit, decoder_};
    decoder_->for_each(node_, &context, [](void* c, const void* key, const void* value) {
      auto* ctx = static_cast<Context*>(c);
      (*ctx->visit)(DumpValue(ctx->decoder, key), DumpValue(ctx->decoder, value));
    });
  }

  const void* identity() const { return node_ ? decoder_->identity(node_) : nullptr; }

 private:
  const Decoder* decoder_ = nullptr;
  const void* node_ = nullptr;
  Kind kind_ = Kind::Null;
};

// A scalar (a dict key, a field) as text: strings as they are, numbers and booleans written out
// ("3", "True"); "" for null, lists and dicts.
std::string text_of(const DumpValue& value);

// Reads many dicts of one layout (a dump's 2,000 entries) field by field in one pass over each
// dict, instead of one lookup per field: keys are recognised by their identity where the
// decoder shares them (a pickle's memoized keys), by their text otherwise. Lives no longer than
// the document it reads (identities are addresses in it).
class DictFields {
 public:
  // `keys`: string literals; read() fills slot i with the value under keys[i].
  explicit DictFields(std::vector<const char*> keys);
  // The dict's values in the order of `keys`, an empty view where a key is absent; valid until
  // the next read.
  const std::vector<DumpValue>& read(const DumpValue& dict);

 private:
  int slot_of(const DumpValue& key);
  std::vector<const char*> keys_;
  std::vector<DumpValue> values_;
  std::unordered_map<const void*, int> slot_by_identity_;
};

// A view of a parsed JSON document (which must outlive it).
DumpValue json_value(const nlohmann::json& doc);

}  // namespace ddx::analyze
