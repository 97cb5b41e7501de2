// The bounds-checked safetensors header parser. Every number in a header is hostile until
// checked: sizes are compared against the file before anything is allocated or read, and
// products of shapes are overflow-checked.
#include "models/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "ddx/errors/errors.h"

namespace ddx::models {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& problem) {
  throw UsageError(file + ": invalid safetensors file: " + problem);
}

[[noreturn]] void fail_tensor(const std::string& file, const std::string& tensor,
                              const std::string& problem) {
  fail(file, "tensor '" + tensor + "': " + problem);
}

// json::parse keeps the last of duplicate keys silently; a header naming a tensor twice is
// ambiguous, so the first duplicate at any level is recorded and reported.
json parse_json_rejecting_duplicates(const char* begin, const char* end, const std::string& file) {
  std::vector<std::set<std::string>> keys_per_open_object;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys_per_open_object.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys_per_open_object.empty()) keys_per_open_object.pop_back();
    } else if (event == json::parse_event_t::key && !keys_per_open_object.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!keys_per_open_object.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(begin, end, callback);
  } catch (const json::exception& e) {
    fail(file, std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) fail(file, "header has the key '" + duplicate + "' twice");
  return header;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::vector<int64_t> parse_shape(const json& entry, const std::string& file, const std::string& name,
                                 uint64_t& elements) {
  if (!entry.contains("shape") || !entry.at("shape").is_array())
    fail_tensor(file, name, "'shape' must be an array of non-negative integers");
  std::vector<int64_t> shape;
  elements = 1;
  for (const json& dim : entry.at("shape")) {
    if (!dim.is_number_unsigned()) fail_tensor(file, name, "shape entry " + dim.dump() + " is not a non-negative integer");
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, d, &elements))
      fail_tensor(file, name, "shape " + entry.at("shape").dump() + " overflows");
    shape.push_back(static_cast<int64_t>(d));
  }
  return shape;
}

std::pair<uint64_t, uint64_t> parse_offsets(const json& entry, const std::string& file, const std::string& name) {
  if (!entry.contains("data_offsets")) fail_tensor(file, name, "'data_offsets' is missing");
  const json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail_tensor(file, name, "'data_offsets' must be [begin, end] of non-negative integers, got " + offsets.dump());
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end) fail_tensor(file, name, "data_offsets " + offsets.dump() + " end before they begin");
  return {begin, end};
}

TensorInfo parse_entry(const std::string& name, const json& entry, const std::string& file,
                       uint64_t data_start, uint64_t data_bytes) {
  if (!entry.is_object()) fail_tensor(file, name, "entry must be an object");
  for (const auto& [key, value] : entry.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail_tensor(file, name, "unknown field '" + key + "'");
  if (!entry.contains("dtype") || !entry.at("dtype").is_string())
    fail_tensor(file, name, "'dtype' must be a string");
  TensorInfo info;
  info.name = name;
  info.file = file;
  info.dtype = entry.at("dtype").get<std::string>();
  const size_t element_bytes = safetensors_dtype_size(info.dtype);
  if (element_bytes == 0) fail_tensor(file, name, "unknown dtype '" + info.dtype + "'");
  uint64_t elements = 0;
  info.shape = parse_shape(entry, file, name, elements);
  const auto [begin, end] = parse_offsets(entry, file, name);
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(elements, element_bytes, &expected_bytes) || end - begin != expected_bytes)
    fail_tensor(file, name, "holds " + std::to_string(end - begin) + " bytes but dtype " + info.dtype +
                                " and shape " + entry.at("shape").dump() + " need " +
                                std::to_string(elements) + " x " + std::to_string(element_bytes));
  if (end > data_bytes)
    fail_tensor(file, name, "data_offsets end " + std::to_string(end) + " is past the end of the data (" +
                                std::to_string(data_bytes) + " bytes)");
  info.data_begin = data_start + begin;
  info.data_end = data_start + end;
  return info;
}

// The tensors must tile [0, data_bytes) exactly: an overlap means two tensors share bytes, a
// gap or trailing bytes mean the header does not describe the file it came with.
void check_tiling(std::vector<TensorInfo>& tensors, uint64_t data_start, uint64_t data_bytes,
                  const std::string& file) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
  });
  uint64_t next = data_start;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.data_begin < next)
      fail_tensor(file, t.name, "overlaps tensor '" + previous->name + "'");
    if (t.data_begin > next)
      fail_tensor(file, t.name, "starts " + std::to_string(t.data_begin - next) +
                                    " bytes after the previous tensor ends (gap)");
    next = t.data_end;
    previous = &t;
  }
  if (next != data_start + data_bytes)
    fail(file, std::to_string(data_start + data_bytes - next) + " bytes after the last tensor are not described by the header");
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, uint64_t file_size,
                                           const std::string& file) {
  if (size < 8 || file_size < 8)
    fail(file, "shorter than the 8-byte header length (" + std::to_string(file_size) + " bytes)");
  if (size > file_size) fail(file, "buffer larger than the file");
  SafetensorsHeader header;
  header.header_bytes = read_u64_le(data);
  if (header.header_bytes > kMaxSafetensorsHeaderBytes)
    fail(file, "header length " + std::to_string(header.header_bytes) + " exceeds the limit of " +
                   std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  if (header.header_bytes > file_size - 8)
    fail(file, "header length " + std::to_string(header.header_bytes) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)");
  if (header.header_bytes > size - 8) fail(file, "buffer does not hold the whole header");
  if (header.header_bytes == 0 || data[8] != '{') fail(file, "header does not start with '{'");
  const char* json_begin = reinterpret_cast<const char*>(data + 8);
  const json j = parse_json_rejecting_duplicates(json_begin, json_begin + header.header_bytes, file);
  if (!j.is_object()) fail(file, "header must be a JSON object");

  const uint64_t data_start = 8 + header.header_bytes;
  const uint64_t data_bytes = file_size - data_start;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(file, "__metadata__ must be an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail(file, "__metadata__ value of '" + key + "' is not a string");
        header.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    header.tensors.push_back(parse_entry(name, entry, file, data_start, data_bytes));
  }
  check_tiling(header.tensors, data_start, data_bytes, file);
  return header;
}

}  // namespace ddx::models
