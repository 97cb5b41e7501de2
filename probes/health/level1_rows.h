#pragma once
// The doctor's and gpu-health's rows (doctor::CheckRow, PASS/WARN/FAIL/SKIP) as `ddx health`
// rows: PASS is OK, WARN is WARN, FAIL is CRITICAL, SKIP is skipped; the fix becomes the
// remediation, and a row that is not OK gets the few words of a drain reason. No LibTorch.
#include <string>

#include "doctor/doctor_checks.h"
#include "health/health_check.h"

namespace ddx::health {

State state_of(doctor::Status status);

// `name`: the row's name in the health report; `reason`: the drain reason when not OK.
Check from_doctor_row(const doctor::CheckRow& row, const std::string& name, const std::string& reason);

// A row built here: the remediation and reason are kept only when the state is not OK.
Check make_check(const std::string& name, State state, const std::string& value, const std::string& remediation = "",
                 const std::string& reason = "");

// A row with nothing to check on this node.
Check skipped_check(const std::string& name, const std::string& why);

}  // namespace ddx::health
