#pragma once
// The safetensors header parser, on an in-memory buffer and without LibTorch, so the fuzz
// target and its corpus test build in seconds. Format: 8-byte little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data; offsets are relative to the first data byte.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddx::models {

struct TensorInfo {
  std::string name;
  std::string dtype;              // "F32", "BF16", "F16", "F64", "I64", "I32", ...
  std::vector<int64_t> shape;
  std::string file;               // the file holding it
  uint64_t data_begin = 0;        // absolute byte offsets in `file`
  uint64_t data_end = 0;
};

constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000;

// Bytes per element of a safetensors dtype name, or 0 for an unknown one.
size_t safetensors_dtype_size(const std::string& dtype);

struct SafetensorsHeader {
  uint64_t header_bytes = 0;                  // N
  std::vector<TensorInfo> tensors;            // in data order
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header. `data` holds the first `size` bytes of the file (at least
// the 8 + N header bytes); `file_size` is the whole file's size, against which offsets are
// checked. Checks: length field present and <= kMaxSafetensorsHeaderBytes and inside the file,
// JSON object, no duplicate names, known dtype, shape of non-negative integers, data_offsets
// [begin, end] with begin <= end, (end - begin) == elements x dtype size (overflow-checked),
// tensors tiling the data section exactly (no overlap, no gap, nothing after the last).
// Throws UsageError "<file>: <problem>", naming the tensor where one is at fault.
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, uint64_t file_size,
                                           const std::string& file);

}  // namespace ddx::models
