#pragma once
// The alarm event log of `ddx top`: one JSON line when an alarm is raised and one when it
// clears, {"unix_ms", "event": "raised"|"cleared", "kind", "rank", "host", "message"}, appended
// whole with O_APPEND so a reader never sees half a line. No LibTorch.
#include <map>
#include <string>

#include "top/top_model.h"

namespace ddx::top {

class EventLog {
 public:
  // Opens `path` for appending (created if missing); throws UsageError naming it.
  explicit EventLog(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  // Logs the alarms of `screen` that are new since the last call, and those that went away.
  void update(const Screen& screen);

 private:
  void write(const std::string& event, const Alarm& alarm, int64_t unix_ms);
  std::string path_;
  int fd_ = -1;
  std::map<std::string, Alarm> active_;
};

}  // namespace ddx::top
