// The collective layer's call and byte counters (comm_counters.h).
#include "ddx/watchdog/comm_counters.h"

#include <array>
#include <mutex>

namespace ddx {
namespace {

constexpr size_t kOpTypes = static_cast<size_t>(OpType::MonitoredBarrier) + 1;

// Keyed by group name (a handful per process); labels are applied when read. One lock per op
// launch: uncontended it costs tens of nanoseconds, against microseconds for the op itself.
std::mutex g_mutex;
std::map<std::string, std::array<CommCount, kOpTypes>> g_counts;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

int64_t payload_bytes(const OpRecord& r) {
  if (r.numel <= 0) return 0;  // barriers, and empty tensors
  const int64_t element = r.bytes / r.numel;
  switch (r.op) {
    case OpType::AllGather: return product(r.out_shape) * element;  // the gathered output
    case OpType::Barrier:
    case OpType::MonitoredBarrier: return 0;
    default: return r.bytes;  // the local input (reduce_scatter's is the full buffer)
  }
}

std::string comm_label(const std::string& name) {
  // DeviceMesh names its groups "<mesh>.<dimension>.<slice>" (device_mesh.cpp).
  const size_t first = name.find('.');
  if (first == std::string::npos) return name;
  const size_t second = name.find('.', first + 1);
  if (second == std::string::npos || name.find('.', second + 1) != std::string::npos) return name;
  return name.substr(first + 1, second - first - 1);
}

void count_op(const OpRecord& r) {
  const int64_t bytes = payload_bytes(r);
  std::lock_guard<std::mutex> lock(g_mutex);
  CommCount& c = g_counts[r.group][static_cast<size_t>(r.op)];
  ++c.calls;
  c.bytes += bytes;
}

CommCounts comm_counts() {
  CommCounts out;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& [group, per_op] : g_counts) {
    for (size_t k = 0; k < kOpTypes; ++k) {
      if (per_op[k].calls == 0) continue;
      CommCount& c = out[comm_label(group)][to_string(static_cast<OpType>(k))];
      c.calls += per_op[k].calls;
      c.bytes += per_op[k].bytes;
    }
  }
  return out;
}

CommCounts comm_counts_since(const CommCounts& before, const CommCounts& after) {
  CommCounts out;
  for (const auto& [label, per_op] : after) {
    const auto b = before.find(label);
    for (const auto& [op, count] : per_op) {
      CommCount d = count;
      if (b != before.end()) {
        if (auto o = b->second.find(op); o != b->second.end()) {
          d.calls -= o->second.calls;
          d.bytes -= o->second.bytes;
        }
      }
      if (d.calls != 0) out[label][op] = d;
    }
  }
  return out;
}

int64_t total_bytes(const CommCounts& counts) {
  int64_t total = 0;
  for (const auto& [label, per_op] : counts) {
    for (const auto& [op, count] : per_op) total += count.bytes;
  }
  return total;
}

}  // namespace ddx
