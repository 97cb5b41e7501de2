// slow-link: every collective of the rank (or only op=<record name>) starts ms=N later, as over a
// degraded link: the rank's peers wait in the collective, so their comm-wait time grows and
// pairwise bandwidth names the rank.
#include <chrono>
#include <thread>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class SlowLink : public Kind {
  std::string name() const override { return "slow-link"; }
  std::string category() const override { return "communication"; }
  std::string summary() const override { return "delay each collective (op=NAME|*, default *) by ms=N"; }
  std::vector<std::string> keys() const override { return {"ms", "op"}; }
  void check(const FaultSpec& s) const override {
    if (s.params.count("ms") == 0) s.fail("slow-link needs ms=N");
    s.int_param("ms", 0, 0, 3600000);
  }
  bool acts_on_collectives() const override { return true; }
  void before_collective(const FaultSpec& s, CollectiveCall& call) const override {
    const std::string op = s.text_param("op", "*");
    if (op != "*" && op != call.op) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(s.int_param("ms", 0, 0, 3600000)));
  }
};

}  // namespace

const Kind& slow_link_kind() {
  static const SlowLink kind;
  return kind;
}

}  // namespace ddx::faults
