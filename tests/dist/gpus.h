#pragma once
// How many GPUs a test may expect ddx to use, counted without ddx or CUDA: the NVIDIA device
// files (/dev/nvidia0, /dev/nvidia1, ...), narrowed by CUDA_VISIBLE_DEVICES, and none when this
// ddx was built without CUDA (DDX_BUILT_WITH_CUDA, from CMake). Counting independently means a
// ddx that stopped seeing a present GPU fails the GPU-side test instead of passing the CPU one.
#include <glob.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace ddx::testing {

inline int gpus_for_ddx() {
#if !DDX_BUILT_WITH_CUDA
  return 0;
#else
  int devices = 0;  // /dev/nvidia[0-9]*, digits only (not nvidiactl, nvidia-uvm, ...)
  glob_t found{};
  if (::glob("/dev/nvidia[0-9]*", 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) {
      const std::string suffix = std::string(found.gl_pathv[i]).substr(11);
      devices += suffix.find_first_not_of("0123456789") == std::string::npos;
    }
  }
  ::globfree(&found);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible) return devices;
  // CUDA's rule: the list ends at the first entry that names no device.
  int listed = 0;
  std::stringstream entries(visible);
  for (std::string entry; std::getline(entries, entry, ',');) {
    const bool uuid = entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0;
    char* end = nullptr;
    const long index = std::strtol(entry.c_str(), &end, 10);
    const bool in_range = !entry.empty() && *end == '\0' && index >= 0 && index < devices;
    if (!uuid && !in_range) break;
    ++listed;
  }
  return listed < devices ? listed : devices;
#endif
}

}  // namespace ddx::testing
