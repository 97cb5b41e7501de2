#pragma once
// The error file's JSON (torchelastic's schema, ddx's details under extraInfo.ddx), private to
// ddx_core.
#include <optional>
#include <string>
#include <vector>

#include "ddx/errors/error_report.h"

namespace ddx::detail {

struct ErrorReport {
  std::string message;              // "<type>: <what>" or "Signal 11 (SIGSEGV) received by ..."
  std::optional<int> signo;         // the fatal signal, if any
  int exit_code = 1;
  std::vector<StackFrame> frames;   // innermost first
  int rank = -1, local_rank = -1, world_size = -1;  // -1: unknown
  std::string host;
  int pid = 0;
  bool verdict = false;             // a command's verdict, not a failure (ddx/errors/verdict.h)
};

std::string error_report_to_json(const ErrorReport& report);

// Writes `content` to `path` so a reader sees the old file or the whole new one, never a part:
// a temporary file in the same directory, fsync, rename. Returns false (and leaves no
// temporary behind) on any error.
bool write_file_atomically(const std::string& path, const std::string& content);

}  // namespace ddx::detail
