#include "observe/gpu_stats.h"

#ifdef DDX_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace ddx::train {

std::optional<GpuMemory> gpu_memory(torch::Device device) {
#ifdef DDX_WITH_CUDA
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto total = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  GpuMemory m;
  m.allocated_bytes = stats.allocated_bytes[total].current;
  m.peak_allocated_bytes = stats.allocated_bytes[total].peak;
  m.reserved_bytes = stats.reserved_bytes[total].current;
  m.peak_reserved_bytes = stats.reserved_bytes[total].peak;
  return m;
#else
  (void)device;
  return std::nullopt;
#endif
}

void reset_gpu_peaks(torch::Device device) {
#ifdef DDX_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
  (void)device;
#endif
}

std::string device_name(torch::Device device) {
#ifdef DDX_WITH_CUDA
  if (device.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device.index()) == cudaSuccess) return prop.name;
  }
#endif
  return device.str();
}

std::optional<double> peak_flops(torch::Device device, torch::Dtype dtype) {
  if (!device.is_cuda()) return std::nullopt;
  const std::string name = device_name(device);
  // Dense (no sparsity) peaks from the vendors' data sheets, SXM parts.
  struct Part {
    const char* match;
    double bf16;
    double fp32;
  };
  static const Part parts[] = {
      {"H200", 989e12, 67e12}, {"H100", 989e12, 67e12}, {"A100", 312e12, 19.5e12},
      {"L40S", 362e12, 91.6e12}, {"B200", 2250e12, 80e12}, {"A10", 125e12, 31.2e12},
  };
  for (const Part& p : parts) {
    if (name.find(p.match) != std::string::npos) return dtype == torch::kBFloat16 ? p.bf16 : p.fp32;
  }
  return std::nullopt;
}

}  // namespace ddx::train
