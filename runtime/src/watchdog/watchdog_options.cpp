// Parsing of the hang-detection options (flags and DDX_* variables share these parsers, so a
// bad value reads the same either way: one line naming the flag or variable).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "ddx/errors/errors.h"
#include "ddx/watchdog/watchdog.h"

namespace ddx {

const char* to_string(OnTimeout action) {
  switch (action) {
    case OnTimeout::Abort: return "abort";
    case OnTimeout::Dump: return "dump";
    case OnTimeout::Wait: return "wait";
  }
  return "abort";
}

OnTimeout parse_on_timeout(const std::string& what, const std::string& text) {
  if (text == "abort") return OnTimeout::Abort;
  if (text == "dump") return OnTimeout::Dump;
  if (text == "wait") return OnTimeout::Wait;
  throw UsageError(what + "='" + text + "' is not one of abort, dump, wait");
}

std::chrono::milliseconds parse_duration(const std::string& what, const std::string& text) {
  size_t unit_at = 0;
  while (unit_at < text.size() && (std::isdigit(static_cast<unsigned char>(text[unit_at])) || text[unit_at] == '.')) {
    ++unit_at;
  }
  const std::string number = text.substr(0, unit_at);
  const std::string unit = text.substr(unit_at);
  char* end = nullptr;
  const double value = number.empty() ? NAN : std::strtod(number.c_str(), &end);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1000;
  else if (unit == "ms") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60000;
  else if (unit == "h") scale = 3600000;
  if (!(value >= 0) || (end && *end) || scale == 0 || value * scale > 1e12) {
    throw UsageError(what + "='" + text + "' is not a duration (examples: 2s, 500ms, 1.5, 10m)");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(value * scale)));
}

std::string format_duration(std::chrono::milliseconds d) {
  std::ostringstream out;
  const auto ms = d.count();
  if (ms < 120000) {
    out << ms / 1000.0 << " s";
  } else {
    out << ms / 60000.0 << " min";
  }
  return out.str();
}

std::chrono::milliseconds HangOptions::effective_heartbeat_timeout() const {
  if (heartbeat_timeout.count() > 0) return heartbeat_timeout;
  return std::max(collective_timeout, 10 * heartbeat_interval);
}

DumpFormat parse_dump_format(const std::string& what, const std::string& text) {
  if (text == "ddx") return DumpFormat::Ddx;
  if (text == "pytorch") return DumpFormat::PyTorch;
  if (text == "both") return DumpFormat::Both;
  throw UsageError(what + "='" + text + "' is not one of ddx, pytorch, both");
}

HangOptions hang_options_from_env(const EnvMap& env, HangOptions o) {
  if (auto v = env_get(env, "DDX_TRACE_DIR")) o.trace_dir = *v;
  if (auto v = env_get(env, "DDX_COLLECTIVE_TIMEOUT")) {
    o.collective_timeout = parse_duration("DDX_COLLECTIVE_TIMEOUT", *v);
  }
  if (auto v = env_get(env, "DDX_ON_TIMEOUT")) o.on_timeout = parse_on_timeout("DDX_ON_TIMEOUT", *v);
  if (auto v = env_get(env, "DDX_FR_BUFFER_SIZE")) {
    o.buffer_size = static_cast<size_t>(parse_int("DDX_FR_BUFFER_SIZE", *v, 1, 10000000));
  }
  if (auto v = env_get(env, "DDX_CHECK_COLLECTIVES")) {
    o.check_collectives = parse_int("DDX_CHECK_COLLECTIVES", *v, 0, 1) == 1;
  }
  if (auto v = env_get(env, "DDX_HEARTBEAT_TIMEOUT")) {
    o.heartbeat_timeout = parse_duration("DDX_HEARTBEAT_TIMEOUT", *v);
  }
  if (auto v = env_get(env, "DDX_FR_FORMAT")) o.dump_format = parse_dump_format("DDX_FR_FORMAT", *v);
  return o;
}

}  // namespace ddx
