#pragma once
// Activation checkpointing (reentrant, as torch.utils.checkpoint with use_reentrant=True):
// forward runs `fn` without recording a graph and keeps only its input; backward runs `fn`
// again with the graph on and backpropagates through it. Parameters used by `fn` receive
// their gradients during that inner backward, so their gradient hooks fire as usual.
// `fn` must be deterministic (ddx models have no dropout) and must outlive the backward.
#include <torch/torch.h>

#include <functional>

namespace ddx::train {

using BlockFunction = std::function<torch::Tensor(const torch::Tensor&)>;

torch::Tensor checkpointed(const BlockFunction* fn, const torch::Tensor& input);

}  // namespace ddx::train
