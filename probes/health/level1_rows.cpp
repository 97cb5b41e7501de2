#include "health/level1_rows.h"

namespace ddx::health {

State state_of(doctor::Status status) {
  switch (status) {
    case doctor::Status::Pass: return State::Ok;
    case doctor::Status::Warn: return State::Warn;
    case doctor::Status::Fail: return State::Critical;
    case doctor::Status::Skip: return State::Ok;  // with skipped = true
  }
  return State::Unknown;
}

Check make_check(const std::string& name, State state, const std::string& value, const std::string& remediation,
                 const std::string& reason) {
  Check check;
  check.name = name;
  check.state = state;
  check.value = value;
  if (state != State::Ok) {
    check.remediation = remediation;
    check.reason = reason;
  }
  return check;
}

Check skipped_check(const std::string& name, const std::string& why) {
  Check check = make_check(name, State::Ok, why);
  check.skipped = true;
  return check;
}

Check from_doctor_row(const doctor::CheckRow& row, const std::string& name, const std::string& reason) {
  if (row.status == doctor::Status::Skip) return skipped_check(name, row.value);
  return make_check(name, state_of(row.status), row.value, row.fix, reason);
}

}  // namespace ddx::health
