#include "top/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

#include "ddx/errors/errors.h"

namespace ddx::top {

EventLog::EventLog(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UsageError("--events " + path + ": " + std::strerror(errno));
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::write(const std::string& event, const Alarm& alarm, int64_t unix_ms) {
  nlohmann::json line = {{"unix_ms", unix_ms}, {"event", event}, {"kind", alarm.kind},
                         {"rank", alarm.rank >= 0 ? nlohmann::json(alarm.rank) : nlohmann::json()},
                         {"host", alarm.host}, {"message", alarm.message}};
  const std::string text = line.dump() + "\n";
  if (::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    // The screen still shows the alarm; losing a log line must not stop the monitor.
  }
}

void EventLog::update(const Screen& screen) {
  std::map<std::string, Alarm> now;
  for (const Alarm& a : screen.alarms) now.emplace(a.key(), a);
  for (const auto& [key, alarm] : now) {
    if (!active_.count(key)) write("raised", alarm, screen.unix_ms);
  }
  for (const auto& [key, alarm] : active_) {
    if (!now.count(key)) write("cleared", alarm, screen.unix_ms);
  }
  active_ = std::move(now);
}

}  // namespace ddx::top
