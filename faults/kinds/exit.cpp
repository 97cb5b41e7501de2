// exit: a clean exit with a non-zero code (code=N, default 1) in the middle of training, as a
// script's sys.exit(1) would do: no signal, no error file, only the code.
#include <unistd.h>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

class Exit : public Kind {
  std::string name() const override { return "exit"; }
  std::string category() const override { return "process"; }
  std::string summary() const override { return "exit with code=N (default 1)"; }
  std::vector<std::string> keys() const override { return {"code"}; }
  void check(const FaultSpec& s) const override { s.int_param("code", 1, 1, 255); }
  void at_step(const FaultSpec& s, int64_t) const override {
    const int code = static_cast<int>(s.int_param("code", 1, 1, 255));
    log_firing(s, "exiting with code " + std::to_string(code));
    ::_exit(code);
  }
};

}  // namespace

const Kind& exit_kind() {
  static const Exit kind;
  return kind;
}

}  // namespace ddx::faults
