#pragma once
// What the watchdog's two files (the watch thread, the heartbeat thread) share privately.
#include <string>

namespace ddx::watchdog_detail {

// The first line of an error text, at most 300 characters: log lines and fatal reasons stay one
// line however long the exception's text is.
std::string first_line(const std::string& text);

}  // namespace ddx::watchdog_detail
