#pragma once
// GPU-side numbers for the metrics: the caching allocator's current and peak bytes, and the
// dense peak FLOP/s the model-FLOPs-utilisation estimate divides by. Zero / absent on CPU.
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ddx::train {

struct GpuMemory {
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};
std::optional<GpuMemory> gpu_memory(torch::Device device);
void reset_gpu_peaks(torch::Device device);

// Dense tensor-core peak of the device for `dtype` (bf16 or fp32-via-TF32 off: fp32 CUDA-core
// peak), from a table of known parts; nullopt when the part is unknown or on CPU.
std::optional<double> peak_flops(torch::Device device, torch::Dtype dtype);
std::string device_name(torch::Device device);

}  // namespace ddx::train
