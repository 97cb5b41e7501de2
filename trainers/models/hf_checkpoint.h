#pragma once
// Hugging Face checkpoints: GPT-2 and Llama tensor names <-> ddx parameter names. GPT-2 stores
// attention and MLP weights as Conv1D, i.e. transposed relative to a Linear weight.
#include <string>

#include "models/causal_lm.h"

namespace ddx::models {

struct HfTensorName {
  std::string name;        // e.g. "transformer.h.0.attn.c_attn.weight"
  bool transposed = false; // HF tensor is the transpose of the ddx parameter
};

// The HF name of a ddx parameter of a model with `config`.
HfTensorName hf_name(const ModelConfig& config, const std::string& ddx_name);

// Loads weights from a safetensors file / sharded index / folder into `model`. Missing,
// unexpected or wrong-shaped tensors -> UsageError naming the tensor (all of them checked
// before any weight is copied, so a failed load leaves the model untouched).
void load_hf_weights(CausalLM& model, const std::string& path);

// Writes `dir`/config.json and `dir`/model.safetensors with HF names, atomically.
void save_hf_weights(CausalLM& model, const std::string& dir);

}  // namespace ddx::models
