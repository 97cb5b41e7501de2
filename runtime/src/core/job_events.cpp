#include "ddx/job_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ddx::events {

Event::Event(std::string name) : name_(std::move(name)) {}

Event& Event::text(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return *this;
}

Event& Event::number(const std::string& key, int64_t value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}

Event& Event::real(const std::string& key, double value) {
  fields_.emplace_back(key, nlohmann::json(value).dump());
  return *this;
}

Event& Event::ranks(const std::string& key, const std::vector<int>& ranks) {
  fields_.emplace_back(key, nlohmann::json(ranks).dump());
  return *this;
}

std::string Event::json() const {
  const int64_t unix_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string line = "{\"event\":" + nlohmann::json(name_).dump() + ",\"unix_us\":" + std::to_string(unix_us) +
                     ",\"pid\":" + std::to_string(::getpid());
  for (const auto& [key, value] : fields_) line += "," + nlohmann::json(key).dump() + ":" + value;
  return line + "}";
}

bool enabled() {
  const char* path = std::getenv(kFileVariable);
  return path != nullptr && *path != '\0';
}

void Event::emit() const {
  if (!enabled()) return;
  const char* path = std::getenv(kFileVariable);
  try {
    const std::string line = json() + "\n";
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::fprintf(stderr, "ddx: warning: cannot record event %s in %s=%s: %s\n", name_.c_str(), kFileVariable, path,
                   std::strerror(errno));
      return;
    }
    const ssize_t n = ::write(fd, line.data(), line.size());
    if (n != static_cast<ssize_t>(line.size())) {
      std::fprintf(stderr, "ddx: warning: event %s not fully written to %s\n", name_.c_str(), path);
    }
    ::close(fd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddx: warning: event %s not recorded: %s\n", name_.c_str(), e.what());
  }
}

}  // namespace ddx::events
