#pragma once
// What a worker leaves behind when it dies: a symbolized stack trace on stderr and a JSON error
// file in torchelastic's schema, so `torchrun --no-python` and `ddx launch` both show the cause.
//
// File layout (torchelastic's, extended under extraInfo.ddx):
//   {"message": {"message": "<type>: <what>",
//                "extraInfo": {"py_callstack": "<trace text>", "timestamp": "<unix s>",
//                              "ddx": {"rank", "local_rank", "world_size", "host", "pid",
//                                      "signal" (name or null), "exit_code", "message",
//                                      "stack": [{"function","file","line"}...], "time"}}}}
#include <optional>
#include <string>
#include <vector>

namespace ddx {

// Installs handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT (on an alternate stack) and a
// std::terminate handler for uncaught exceptions. Each prints the trace and writes the error
// file named by $TORCHELASTIC_ERROR_FILE (if set), then dies with the original signal / abort.
// Call once, first thing in main.
void install_error_handlers();

// Rank information for the report, once known.
void set_error_report_rank(int rank, int local_rank, int world_size);

// Writes the error file for an error caught by the caller (e.g. a collective timeout the
// caller turns into an exit code) and prints it; does not exit. `with_stack`: include the
// calling thread's stack; false when that thread is not where the error is (the watchdog's
// own thread reporting a collective stuck elsewhere: its frames would only mislead).
void write_error_report(const std::string& message, int exit_code, bool with_stack = true);

struct StackFrame {
  std::string function;
  std::string file;
  int line = 0;
};

// What a launcher reads back from a worker's error file.
struct ErrorFileSummary {
  std::string message;               // first line of the message
  std::optional<std::string> signal; // "SIGSEGV" etc.
  std::vector<StackFrame> frames;    // top frames, innermost first, ddx's own frames skipped
  std::string host;
  int pid = 0;
};

// Parses an error file written by ddx or by torchelastic's @record (message and py_callstack
// only). nullopt when the file is missing, empty or not JSON.
std::optional<ErrorFileSummary> read_error_file(const std::string& path);

// "SIGSEGV" for 11 etc.; "signal N" for unknown numbers.
std::string signal_name(int signo);

}  // namespace ddx
