// nan: NaN into every gradient of the rank at the step (value=inf: +Inf), through a real backward
// pass: the loss scale is multiplied by it. Unchecked, the reduction spreads it to every rank and
// the optimizer writes it into the weights; --nan-check must name this rank and step first.
#include <cmath>
#include <limits>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Nan : public Kind {
  std::string name() const override { return "nan"; }
  std::string category() const override { return "compute"; }
  std::string summary() const override { return "NaN (value=inf: +Inf) into every gradient of the rank"; }
  std::vector<std::string> keys() const override { return {"value"}; }
  void check(const FaultSpec& s) const override {
    const std::string v = s.text_param("value", "nan");
    if (v != "nan" && v != "inf") s.fail("value must be nan or inf, not '" + v + "'");
  }
};

}  // namespace

double gradient_factor() {
  const FaultSpec* s = find_now("nan");
  if (!s) return 1.0;
  const bool inf = s->text_param("value", "nan") == "inf";
  log_firing(*s, inf ? "+Inf into every gradient" : "NaN into every gradient");
  return inf ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
}

const Kind& nan_kind() {
  static const Nan kind;
  return kind;
}

}  // namespace ddx::faults
