// corrupt-collective: the rank's result of op=<record name> (default all_reduce; * for every op)
// gets +1 in element 0 after it completes: silent corruption that only a check of the values
// (the probes' #wrong, --replica-check-freq) can see.
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class CorruptCollective : public Kind {
  std::string name() const override { return "corrupt-collective"; }
  std::string category() const override { return "compute"; }
  std::string summary() const override { return "add 1 to element 0 of the result of op=NAME|* (default all_reduce)"; }
  std::vector<std::string> keys() const override { return {"op"}; }
  bool acts_on_collectives() const override { return true; }
  void before_collective(const FaultSpec& s, CollectiveCall& call) const override {
    const std::string op = s.text_param("op", "all_reduce");
    if (op == "*" || op == call.result_op) call.corrupt_result = true;
  }
};

}  // namespace

const Kind& corrupt_collective_kind() {
  static const CorruptCollective kind;
  return kind;
}

}  // namespace ddx::faults
