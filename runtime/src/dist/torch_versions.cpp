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

namespace ddx {

std::vector<std::pair<std::string, std::string>> torch_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("libtorch", TORCH_VERSION);
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
  out.emplace_back("gpus", std::to_string(torch::cuda::device_count()));
#else
  out.emplace_back("cuda", "not built in");
#endif
  return out;
}

}  // namespace ddx
