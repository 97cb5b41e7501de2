#pragma once
// Versions of everything a bug report needs: ddx, LibTorch, CUDA, NCCL, MPI, compiler.
#include <string>
#include <utility>
#include <vector>

namespace ddx {

// (component, version) pairs known without LibTorch: ddx, MPI, compiler.
std::vector<std::pair<std::string, std::string>> version_report();

// LibTorch, CUDA runtime and driver, NCCL, GPU count. Defined in ddx_dist (LibTorch builds only).
std::vector<std::pair<std::string, std::string>> torch_versions();
// LibTorch's own version string ("2.11.0"), the first of torch_versions(); also in ddx_dist.
const char* libtorch_version();

// "0.1.0"
const char* ddx_version();

}  // namespace ddx
