// LibTorch, CUDA and NCCL versions for `ddx version`.
#include <torch/cuda.h>
#include <torch/version.h>
#ifdef DDX_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#include <string>
#include <utility>
#include <vector>

#include "ddx/version.h"

namespace ddx {

const char* libtorch_version() { return TORCH_VERSION; }

std::vector<std::pair<std::string, std::string>> torch_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("libtorch", libtorch_version());
#ifdef DDX_WITH_CUDA
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  auto cuda_text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  out.emplace_back("cuda runtime", cuda_text(runtime));
  out.emplace_back("cuda driver", have_driver ? cuda_text(driver) : "none");
  int nccl = 0;
  ncclGetVersion(&nccl);
  out.emplace_back("nccl", std::to_string(nccl / 10000) + "." + std::to_string((nccl / 100) % 100) +
                               "." + std::to_string(nccl % 100));
  const int gpus = static_cast<int>(torch::cuda::device_count());
  out.emplace_back("gpus", std::to_string(gpus));
  // Each GPU by name: a bug report (and the GPU check, ci/gpu_check.sh) must say which part ran.
  for (int i = 0; i < gpus; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    out.emplace_back("gpu " + std::to_string(i), std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                                                     std::to_string(prop.minor) + ", " +
                                                     std::to_string(prop.totalGlobalMem >> 30) + " GiB)");
  }
#else
  out.emplace_back("cuda", "not built in");
#endif
  return out;
}

}  // namespace ddx
