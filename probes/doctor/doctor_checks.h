#pragma once
// The judgement of `ddx doctor`: every rank's facts (doctor_facts.h) in, one row per check out,
// each PASS / WARN / FAIL / SKIP with the measured value and a one-line fix. Pure functions of
// the facts, so every check is tested with injected failing inputs. No LibTorch.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ddx::doctor {

enum class Status { Pass, Warn, Fail, Skip };
const char* to_string(Status status);

struct CheckRow {
  std::string name;
  Status status = Status::Pass;
  std::string value;  // what was measured, naming the odd rank or host out
  std::string fix;    // one line; empty when nothing needs doing
};

// `ranks`: one facts object per rank, any order.
std::vector<CheckRow> evaluate(const std::vector<nlohmann::json>& ranks);

// The table rank 0 prints, and the exit code: 1 when any row FAILs, else 0.
std::string format_table(const std::vector<CheckRow>& rows);
int exit_code(const std::vector<CheckRow>& rows);
// The FAIL rows in one line, for the verdict every rank ends with (ddx/errors/verdict.h):
// "FAIL: hosts reach each other (node-A -> node-B ...); ..."; "" when none failed.
std::string failed_checks(const std::vector<CheckRow>& rows);
nlohmann::json to_json(const std::vector<CheckRow>& rows);

}  // namespace ddx::doctor
