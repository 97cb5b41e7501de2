#pragma once
// `ddx validate`: cluster acceptance in one command. Runs the existing commands as stages, in
// order, each under the chosen launcher with its own report writer: doctor, selfcheck,
// bandwidth (all collectives; busbw at the largest size against the floor of --expect or of
// the detected link type, link_types.h), the pairwise link matrix, a short parity run and a
// short training burn-in with the flight recorder dumping into <out>/traces. One PASS/FAIL
// line per stage as it goes; stops at the first FAIL unless --keep-going; then one report:
// validate.json, validate.md and a self-contained validate.html (tables and inline plots).
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace ddx::validate {

struct ValidateOptions {
  int nproc = 2;
  std::string launcher;   // a command prefix ("mpiexec -n 4"); empty: ddx launch -np <nproc> --
  std::string out_dir = "validate-report";
  bool keep_going = false;
  std::string expect;     // --expect: a link type or GB/s; empty: detected from the doctor
  std::string max_bytes = "1M";
  int parity_steps = 3;
  int burn_in_steps = 20;
  double stage_timeout_s = 600;
};

struct Stage {
  std::string name;
  std::vector<std::string> argv;
  std::vector<std::string> artefacts;  // files the stage writes, relative to out_dir
  std::string summary_marker;          // starts the command's own summary line ("selfcheck: ")
  std::map<std::string, std::string> env;  // added to the stage's environment
};

struct StageResult {
  std::string name;
  bool passed = false;
  bool ran = false;       // false: skipped after an earlier FAIL
  int exit_code = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string log;        // relative to out_dir
  std::string summary;    // the stage's own last output line
  std::vector<std::string> artefacts;
  nlohmann::json details;  // the bandwidth stage: the threshold and busbw per collective
};

// The stages for these options; `ddx` is the binary to run.
std::vector<Stage> plan_stages(const ValidateOptions& options, const std::string& ddx);

// Writes validate.json, validate.md and validate.html into out_dir (atomically).
void write_report(const ValidateOptions& options, const std::vector<StageResult>& results);

}  // namespace ddx::validate
