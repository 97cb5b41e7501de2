#pragma once
// A job's machine-readable record of what its detectors, its launcher and its recovery saw: one
// JSON object per line, appended to the file named by DDX_EVENTS_FILE when it is set (the fault
// matrix sets it for each job it runs). The console lines stay the same and stay for people;
// suites read these records instead, so rewording a log line cannot break a verdict.
//
//   {"event": "nan_check.nonfinite", "unix_us": 1796578767350123, "pid": 812, "ranks": [2], "step": 13}
//
// Every record has "event", "unix_us" (wall clock, comparable across hosts as the launcher's
// failure times are) and "pid"; the rest is the event's own. The names and fields are listed in
// docs/faults.md ("Events"). Each record is one write(2) on a file opened with O_APPEND, so
// the ranks of a node and its launcher can share one file. No LibTorch.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx::events {

// The variable that names the file; unset or empty: nothing is recorded.
inline constexpr const char* kFileVariable = "DDX_EVENTS_FILE";

class Event {
 public:
  explicit Event(std::string name);
  Event& text(const std::string& key, const std::string& value);
  Event& number(const std::string& key, int64_t value);
  Event& real(const std::string& key, double value);
  Event& ranks(const std::string& key, const std::vector<int>& ranks);
  // Appends the record to $DDX_EVENTS_FILE. Never throws: a record that cannot be written is
  // lost, with one warning on stderr for the first such record of the process (a full disk must
  // not repeat it at every step).
  void emit() const;
  // The record as it would be written (one line, no newline).
  std::string json() const;

 private:
  std::string name_;
  std::vector<std::pair<std::string, std::string>> fields_;  // key, encoded JSON value
};

// Whether events are being recorded (DDX_EVENTS_FILE is set): callers may skip building records
// that only exist for them (one per training step).
bool enabled();

// At a command's start: a DDX_EVENTS_FILE that cannot be appended to (no such folder, no
// permission) throws UsageError naming the variable, before anything runs. Nothing is written
// (an existing file is opened for append, never truncated; a missing one is not created).
void check_file_variable();

// The wall clock the records carry, in microseconds since the epoch.
int64_t unix_now_us();

}  // namespace ddx::events
