#pragma once
// This machine's numbers for `ddx top`: GPUs through NVML, loaded at run time with dlopen (no
// CUDA needed to build or run; without the library the note says "no NVML" and the CPU numbers
// stand in), CPU load and memory from /proc, and the job's processes on this host.
// No LibTorch.
#include <memory>
#include <string>
#include <vector>

#include "top/top_model.h"

namespace ddx {
class Nvml;
}  // namespace ddx

namespace ddx::top {

// The GPUs of this host through the runtime's NVML loader (ddx/nvml.h).
class Nvml {
 public:
  // Loads NVML and initialises it; never throws (see available()/error()).
  Nvml();
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool available() const { return lib_ != nullptr; }
  // "no NVML: no NVIDIA driver (libnvidia-ml.so.1: cannot open shared object file ...)" and the like.
  const std::string& error() const { return error_; }
  // One entry per GPU; fills `error` and returns {} when a query fails.
  std::vector<GpuStats> query(std::string& error) const;

 private:
  std::unique_ptr<::ddx::Nvml> lib_;
  std::string error_;
};

// CPU load, memory and GPUs of this host; `pids` are the job's processes here (counted alive,
// their RSS summed).
NodeView local_node(const Nvml& nvml, const std::vector<int>& pids);

// This host's name, as ranks report it.
std::string local_hostname();

}  // namespace ddx::top
