#pragma once
// JUnit XML, the format CI systems read test results from: one testsuite of test cases, a
// <failure> in each case that failed. Shared by every report that a CI job should show per case
// (`ddx parity`, `ddx fault matrix`, `ddx validate`).
#include <string>
#include <vector>

namespace ddx {

struct JunitCase {
  std::string classname;  // "ddx.parity.ddp"
  std::string name;
  double seconds = 0;
  bool failed = false;
  std::string message;    // the failure's (or skip's) one-line message
  std::string text;       // the failure's body (a log path, the evidence)
  bool skipped = false;   // not run (message: why): counted apart, never as passed
};

// The whole document; escaped, ready for write_file_atomically.
std::string junit_xml(const std::string& suite, const std::vector<JunitCase>& cases);

}  // namespace ddx
