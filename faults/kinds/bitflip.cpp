// bitflip: one bit of one parameter flipped on one data-parallel replica after the step's
// update (param=NAME, default the first; bit=N of element 0, default 22, float32's highest
// mantissa bit): silent data corruption, the loss barely moves, and only a comparison of the
// replicas (--replica-check-freq) sees it. The flip itself is in faults/dist/parameter_faults.cpp.
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Bitflip : public Kind {
  std::string name() const override { return "bitflip"; }
  std::string category() const override { return "compute"; }
  std::string summary() const override { return "flip bit=N (default 22) of element 0 of parameter param=NAME"; }
  std::vector<std::string> keys() const override { return {"param", "bit"}; }
  void check(const FaultSpec& s) const override { s.int_param("bit", 22, 0, 63); }
};

}  // namespace

const Kind& bitflip_kind() {
  static const Bitflip kind;
  return kind;
}

}  // namespace ddx::faults
