#pragma once
// What the multi-process test workers (pg_worker, tp_worker) share: a check that throws (the
// worker then exits non-zero through the error handlers) and a count of collectives by kind,
// seen through the collective layer's records.
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "ddx/watchdog/op_record.h"

namespace ddx::testing {

inline void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

class OpCounter : public OpObserver {
 public:
  void on_enqueue(const OpRecord& r) override {
    std::lock_guard<std::mutex> lock(mutex);
    ++counts[to_string(r.op)];
  }
  // The counts so far, and a fresh start.
  std::map<std::string, int> take() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(counts, {});
  }
  std::mutex mutex;
  std::map<std::string, int> counts;
};

}  // namespace ddx::testing
