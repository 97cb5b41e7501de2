#pragma once
// Reading back what ddx/watchdog/job_events.h appended to a DDX_EVENTS_FILE: the fault matrix reads its
// jobs' evidence with it, and so do tests that check a job's events (where it resumed, who
// failed) instead of its log text. Apart from job_events.h, which every detector includes, so
// that only readers pay for nlohmann/json.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ddx::events {

// One record as written: its "event", its "unix_us", and the whole record with its own fields.
struct Recorded {
  std::string name;       // "launch.attempt_failed", "train.resumed", ...
  int64_t unix_us = 0;    // when it was recorded, on the wall clock
  nlohmann::json record;  // the whole record, its own fields included
};

// The file's records in the order they were recorded (by unix_us; a node's records keep their
// file order on a tie). A line that does not parse (a record cut off by a crash) is left out; a
// missing file gives none.
std::vector<Recorded> read_records(const std::string& path);

}  // namespace ddx::events
