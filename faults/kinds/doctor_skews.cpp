// clock-skew and version-skew: what `ddx doctor` measures on a rank, shifted, so that its clock
// and version checks can be shown to fail on hosts that share one kernel clock and one binary
// (tests/dist/multinode_test.cpp). The doctor reads them (probes/doctor/doctor_command.cpp).
#include "faults/faults.h"

namespace ddx::faults {
namespace {

class ClockSkew : public Kind {
  std::string name() const override { return "clock-skew"; }
  std::string category() const override { return "test"; }
  std::string summary() const override { return "ddx doctor reads this rank's wall clock ms=N milliseconds off"; }
  std::vector<std::string> keys() const override { return {"ms"}; }
  void check(const FaultSpec& s) const override {
    if (s.params.count("ms") == 0) s.fail("clock-skew needs ms=N (may be negative)");
    s.int_param("ms", 0, -86400000, 86400000);
  }
};

class VersionSkew : public Kind {
  std::string name() const override { return "version-skew"; }
  std::string category() const override { return "test"; }
  std::string summary() const override { return "ddx doctor reports this rank's ddx version with +text=S appended"; }
  std::vector<std::string> keys() const override { return {"text"}; }
  void check(const FaultSpec& s) const override {
    if (s.text_param("text", "").empty()) s.fail("version-skew needs text=S");
  }
};

}  // namespace

const Kind& clock_skew_kind() {
  static const ClockSkew kind;
  return kind;
}

const Kind& version_skew_kind() {
  static const VersionSkew kind;
  return kind;
}

}  // namespace ddx::faults
