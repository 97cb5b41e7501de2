#pragma once
// A verdict is not a crash. A command that measured the job and judged it (a probe naming a slow
// rank, a selfcheck with a wrong result, a doctor or gpu-health FAIL, a missed --min-busbw) ran
// to its end: every rank reaches the same verdict, exits with its code and writes it, one line,
// into its error file ($TORCHELASTIC_ERROR_FILE, torchelastic's schema) marked as a verdict
// (extraInfo.ddx.verdict). A launcher that reads the mark says that the job reported a verdict
// and which one, instead of naming the first rank to exit as the root cause of a failure
// (`ddx launch`, docs/launch.md). No LibTorch.
#include <optional>
#include <string>

namespace ddx {

struct JobVerdict {
  int exit_code = 1;
  std::string message;  // one line: "compute: 2 ranks x 2 metrics, 14 trials: SLOW: rank 1 (...)"
};

// Writes this rank's error file with the verdict (no stack: nothing went wrong here) and prints
// nothing: the command's own report already said it. Call it on every rank with the verdict
// they agreed on, just before returning its exit code (non-zero).
void write_verdict_report(const std::string& message, int exit_code);

// The verdict in the error file at `path`, when the file holds one (nullopt for a missing file,
// a crash's or an error's report, or junk).
std::optional<JobVerdict> read_verdict_report(const std::string& path);

}  // namespace ddx
