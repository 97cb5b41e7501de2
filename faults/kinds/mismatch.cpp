// mismatch: the rank launches the first collective of op=<record name> at the step (default
// all_reduce; broadcast and reduce too, the single-tensor ops) with one element fewer than its
// peers, as code whose shapes depend on rank-local state would. --check-collectives names the
// rank before anything is sent; without it the backend fails or hangs and the flight-recorder
// dumps, read by `ddx analyze`, show the rank whose size differs.
#include <atomic>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Mismatch : public Kind {
  std::string name() const override { return "mismatch"; }
  std::string category() const override { return "communication"; }
  std::string summary() const override {
    return "launch one collective (op=all_reduce|broadcast|reduce, default all_reduce) one element short";
  }
  std::vector<std::string> keys() const override { return {"op"}; }
  void check(const FaultSpec& s) const override {
    const std::string op = s.text_param("op", "all_reduce");
    if (op != "all_reduce" && op != "broadcast" && op != "reduce") {
      s.fail("op must be all_reduce, broadcast or reduce (ops whose input is their output), not '" + op + "'");
    }
  }
  bool acts_on_collectives() const override { return true; }
  void before_collective(const FaultSpec& s, CollectiveCall& call) const override {
    if (call.op != s.text_param("op", "all_reduce") || fired_.exchange(true)) return;
    log_firing(s, "launching " + call.op + " one element short");
    call.drop_last_element = true;
  }

 private:
  mutable std::atomic<bool> fired_{false};  // one collective per process
};

}  // namespace

const Kind& mismatch_kind() {
  static const Mismatch kind;
  return kind;
}

}  // namespace ddx::faults
