#pragma once
// How big the host engines' buffers may be: a share of the memory the kernel says is available
// (MemAvailable), split between the ranks on this host, for a send, a receive and a scratch
// buffer of the largest size, keeping a fifth in reserve. Sizes beyond it are reduced with a
// message, as nccl-tests does for GPU memory.
#include <cstddef>
#include <string>

namespace ddx::bw {

// MemAvailable from /proc/meminfo in bytes (DDX_FAULT=host-memory@bytes=N overrides it in
// tests); 0 when unknown.
size_t available_host_memory();
// Bytes per buffer for one of `local_ranks` ranks sharing `available` bytes.
size_t host_buffer_budget(size_t available, int local_ranks);

}  // namespace ddx::bw
