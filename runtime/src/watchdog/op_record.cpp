#include "ddx/watchdog/op_record.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

namespace ddx {

const char* to_string(OpType op) {
  switch (op) {
    case OpType::AllReduce: return "all_reduce";
    case OpType::Broadcast: return "broadcast";
    case OpType::Reduce: return "reduce";
    case OpType::AllGather: return "all_gather";
    case OpType::ReduceScatter: return "reduce_scatter";
    case OpType::AllToAll: return "all_to_all";
    case OpType::Send: return "send";
    case OpType::Recv: return "recv";
    case OpType::Barrier: return "barrier";
    case OpType::MonitoredBarrier: return "monitored_barrier";
  }
  return "unknown";
}

const char* to_string(OpState state) {
  switch (state) {
    case OpState::Scheduled: return "scheduled";
    case OpState::Started: return "started";
    case OpState::Completed: return "completed";
    case OpState::Failed: return "failed";
  }
  return "unknown";
}

int64_t steady_now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

namespace {
// Copy-on-write list: notify paths read a snapshot without holding the lock while calling out.
std::mutex g_observers_mutex;
std::shared_ptr<const std::vector<OpObserver*>> g_observers =
    std::make_shared<const std::vector<OpObserver*>>();

std::shared_ptr<const std::vector<OpObserver*>> observers() {
  std::lock_guard<std::mutex> lock(g_observers_mutex);
  return g_observers;
}
}  // namespace

void add_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> lock(g_observers_mutex);
  auto next = std::make_shared<std::vector<OpObserver*>>(*g_observers);
  next->push_back(observer);
  g_observers = std::move(next);
}

void remove_op_observer(OpObserver* observer) {
  std::lock_guard<std::mutex> lock(g_observers_mutex);
  auto next = std::make_shared<std::vector<OpObserver*>>(*g_observers);
  next->erase(std::remove(next->begin(), next->end(), observer), next->end());
  g_observers = std::move(next);
}

void notify_enqueue(const OpRecord& record) {
  for (OpObserver* o : *observers()) o->on_enqueue(record);
}
void notify_start(const OpRecord& record) {
  for (OpObserver* o : *observers()) o->on_start(record);
}
void notify_end(const OpRecord& record) {
  for (OpObserver* o : *observers()) o->on_end(record);
}

}  // namespace ddx
