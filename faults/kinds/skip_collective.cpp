// skip-collective: the rank leaves out the first collective of op=<record name> (default
// all_reduce; * for any) at the step, as a rank that took another branch would: no sequence
// number, nothing sent. Its later collectives pair with its peers' earlier ones, so the job
// desyncs; in the flight-recorder dumps the rank is one behind from there on, with its call
// sites one ahead, and `ddx analyze` names it as the rank that skipped the collective.
#include <atomic>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class SkipCollective : public Kind {
  std::string name() const override { return "skip-collective"; }
  std::string category() const override { return "communication"; }
  std::string summary() const override { return "leave out one collective (op=NAME|*, default all_reduce)"; }
  std::vector<std::string> keys() const override { return {"op"}; }
  bool acts_on_collectives() const override { return true; }
  void before_collective(const FaultSpec& s, CollectiveCall& call) const override {
    const std::string op = s.text_param("op", "all_reduce");
    if ((op != "*" && op != call.op) || skipped_.exchange(true)) return;
    log_firing(s, "leaving out " + call.op);
    call.skip = true;
  }

 private:
  mutable std::atomic<bool> skipped_{false};  // one collective per process
};

}  // namespace

const Kind& skip_collective_kind() {
  static const SkipCollective kind;
  return kind;
}

}  // namespace ddx::faults
