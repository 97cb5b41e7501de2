#pragma once
// What a gather of full tensors reads from a rank's storage (Strategy::full_tensors()): the
// parameters, or the gradients the optimizer is about to use; and the dtype they come back in.
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace ddx::train {

// What a gather of full tensors reads from each rank's storage.
enum class Held { Parameters, Gradients };

// `parameter` itself, or its gradient (zeros when it has none), detached.
inline torch::Tensor held_tensor(const torch::Tensor& parameter, Held what) {
  if (what == Held::Parameters) return parameter.detach();
  return parameter.grad().defined() ? parameter.grad().detach() : torch::zeros_like(parameter);
}

// held_tensor() of each named parameter.
inline std::vector<std::pair<std::string, torch::Tensor>> held_tensors(
    const std::vector<std::pair<std::string, torch::Tensor>>& parameters, Held what) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, p] : parameters) out.emplace_back(name, held_tensor(p, what));
  return out;
}

// The dtype of gathered full tensors: float64 stays float64 (so a float64 run compares at its
// own precision); everything else is widened or kept at float32.
inline torch::Dtype full_dtype(torch::Dtype training) {
  return training == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

}  // namespace ddx::train
