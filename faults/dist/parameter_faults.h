#pragma once
// Faults on a rank's own parameter tensors (faults/dist/parameter_faults.cpp, LibTorch). The
// training loop calls this after each update with the strategy's local parameters.
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace ddx::faults {

// Flips the bit a bitflip fault of this rank and step asks for (nothing otherwise). Throws
// UsageError when its param= names no parameter of this rank or its bit is past the element.
void inject_parameter_faults(const std::vector<std::pair<std::string, at::Tensor>>& parameters);

}  // namespace ddx::faults
