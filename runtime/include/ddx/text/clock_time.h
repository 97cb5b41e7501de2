#pragma once
// Wall-clock times as the log lines' prefix shows them, for messages that say "since when"
// (clock_time() is implemented in log.cpp beside that prefix), and elapsed seconds.
#include <chrono>
#include <string>

namespace ddx::log {

// "14:02:11.123": `when` in local time.
std::string clock_time(std::chrono::system_clock::time_point when);

}  // namespace ddx::log

namespace ddx {

// Seconds from `start` to now, on the monotonic clock that step and phase timings use.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ddx
