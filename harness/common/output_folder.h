#pragma once
// An output folder that holds only the current run's files. A suite that judges what its stages
// or jobs wrote (ddx validate, ddx fault matrix) must never read an earlier run's leftovers as
// this run's, and must never delete them either.
#include <string>

namespace ddx::harness {

// Makes `dir` an empty folder for this run. A folder that already holds files (an earlier run's)
// is renamed, never deleted, to <dir>.previous-<its last change as YYYYMMDD-HHMMSS> (with -2,
// -3, ... when that name is taken), and that name is returned; "" when nothing was moved. Throws
// UsageError naming `flag` and `dir` when it cannot be written (ddx/processes/output_path.h), is or holds
// the current folder, or cannot be moved.
std::string fresh_output_folder(const std::string& flag, const std::string& dir);

}  // namespace ddx::harness
