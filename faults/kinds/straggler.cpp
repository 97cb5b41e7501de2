// straggler: the rank's steps take factor=F times as long (F > 1): at each step start it sleeps
// (F-1) times the length of the step that just ended, so the slowdown follows the real step time.
#include <chrono>
#include <thread>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Straggler : public Kind {
  std::string name() const override { return "straggler"; }
  std::string category() const override { return "compute"; }
  std::string summary() const override { return "make each step factor=F times slower"; }
  std::vector<std::string> keys() const override { return {"factor"}; }
  void check(const FaultSpec& s) const override {
    if (s.params.count("factor") == 0) s.fail("straggler needs factor=F");
    s.number_param("factor", 1, 1, 1000);
  }
  void at_step(const FaultSpec& s, int64_t) const override {
    using clock = std::chrono::steady_clock;
    static clock::time_point last_start;  // one process, one training loop
    const clock::time_point now = clock::now();
    if (last_start != clock::time_point{}) {
      const double factor = s.number_param("factor", 1, 1, 1000);
      std::this_thread::sleep_for((now - last_start) * (factor - 1));
    }
    last_start = clock::now();
  }
};

}  // namespace

const Kind& straggler_kind() {
  static const Straggler kind;
  return kind;
}

}  // namespace ddx::faults
