#pragma once
// Wall-clock times as the log lines' prefix shows them, for messages that say "since when".
// Implemented in log.cpp beside that prefix.
#include <chrono>
#include <string>

namespace ddx::log {

// "14:02:11.123": `when` in local time.
std::string clock_time(std::chrono::system_clock::time_point when);

}  // namespace ddx::log
