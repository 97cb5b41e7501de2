#pragma once
// safetensors files (single and sharded with model.safetensors.index.json), bounds-checked.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "models/safetensors_header.h"  // TensorInfo and the in-memory header parser

namespace ddx::models {

// The tensors of a safetensors file, a sharded index (model.safetensors.index.json), or a
// folder holding either. Validates the header: length limit (100 MB), JSON, dtype known, shape
// product × dtype size == byte length, offsets inside the file, no overlaps, no gaps.
// Throws UsageError naming the file and the problem.
std::map<std::string, TensorInfo> read_safetensors_index(const std::string& path);

// Reads one tensor (or rows [row_begin, row_end) of dim 0, reading only those bytes), on CPU
// in the file's dtype. A file shorter than its header said -> UsageError naming file and tensor.
torch::Tensor read_tensor(const TensorInfo& info);
torch::Tensor read_tensor_rows(const TensorInfo& info, int64_t row_begin, int64_t row_end);
// Columns [col_begin, col_end) of a 2-D tensor, one read per row (for transposed layouts, e.g.
// GPT-2's Conv1D weights, whose columns are a Linear weight's rows).
torch::Tensor read_tensor_columns(const TensorInfo& info, int64_t col_begin, int64_t col_end);

// The safetensors dtype name of a torch dtype, and back; UsageError for one without a mapping.
std::string safetensors_dtype(torch::Dtype dtype);
torch::Dtype torch_dtype(const std::string& safetensors_dtype);

// Writes tensors to one file, atomically (temp, fsync, rename), with optional string metadata.
// Tensors may be on any device and non-contiguous; they are written in the order given.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace ddx::models
