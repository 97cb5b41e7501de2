#pragma once
// Hugging Face checkpoints: GPT-2 and Llama tensor names <-> ddx parameter names. GPT-2 stores
// attention and MLP weights as Conv1D, i.e. transposed relative to a Linear weight.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/causal_lm.h"
#include "models/safetensors_header.h"

namespace ddx::models {

struct HfTensorName {
  std::string name;        // e.g. "transformer.h.0.attn.c_attn.weight"
  bool transposed = false; // HF tensor is the transpose of the ddx parameter
};

// The HF name of a ddx parameter of a model with `config`.
HfTensorName hf_name(const ModelConfig& config, const std::string& ddx_name);

// Where each ddx parameter lives in a HF checkpoint.
struct HfSource {
  TensorInfo info;
  bool transposed = false;
};
using ParameterShape = std::pair<std::string, std::vector<int64_t>>;
// Matches the parameters (name, full shape) against the checkpoint at `path`: every parameter
// found with the right shape and a floating-point dtype, nothing unexpected left over;
// otherwise UsageError listing the problems. Reads headers only.
std::map<std::string, HfSource> match_hf_tensors(const ModelConfig& config, const std::vector<ParameterShape>& parameters,
                                                const std::string& path);
// Rows [row_begin, row_end) of the ddx parameter (dim 0 of the ddx layout) in the file's
// dtype, reading only those bytes (columns of a transposed GPT-2 Conv1D weight).
torch::Tensor read_hf_rows(const HfSource& source, int64_t row_begin, int64_t row_end);

// Loads weights from a safetensors file / sharded index / folder into `model`. Missing,
// unexpected or wrong-shaped tensors -> UsageError naming the tensor (all of them checked
// before any weight is copied, so a failed load leaves the model untouched).
void load_hf_weights(CausalLM& model, const std::string& path);

// Writes `dir`/config.json and `dir`/model.safetensors with HF names, atomically.
void save_hf_weights(CausalLM& model, const std::string& dir);

}  // namespace ddx::models
