#include "ddx/watchdog/job_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "ddx/errors/errors.h"
#include "ddx/watchdog/job_event_records.h"

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

int64_t unix_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Event::json() const {
  std::string line = "{\"event\":" + nlohmann::json(name_).dump() + ",\"unix_us\":" + std::to_string(unix_now_us()) +
                     ",\"pid\":" + std::to_string(::getpid());
  for (const auto& [key, value] : fields_) line += "," + nlohmann::json(key).dump() + ":" + value;
  return line + "}";
}

bool enabled() {
  const char* path = std::getenv(kFileVariable);
  return path != nullptr && *path != '\0';
}

void check_file_variable() {
  if (!enabled()) return;
  const char* path = std::getenv(kFileVariable);
  // Exists: it must open for append. Missing: its folder must take a new file (access(2) on the
  // folder, so nothing is created before the command decides to run).
  const std::string file = path;
  int error = 0;
  if (::access(path, F_OK) == 0) {
    const int fd = ::open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) error = errno;
    if (fd >= 0) ::close(fd);
  } else {
    const size_t slash = file.rfind('/');
    const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
    if (::access(folder.c_str(), W_OK | X_OK) != 0) error = errno;
  }
  if (error != 0) {
    throw UsageError(std::string(kFileVariable) + "=" + file + " cannot be written: " + std::strerror(error));
  }
}

namespace {

// One warning per process: a record that cannot be written usually means every later one
// cannot either (disk full, folder removed).
void warn_once(const std::string& what) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) std::fprintf(stderr, "ddx: warning: %s (later events are not reported)\n", what.c_str());
}

}  // namespace

void Event::emit() const {
  if (!enabled()) return;
  const char* path = std::getenv(kFileVariable);
  try {
    const std::string line = json() + "\n";
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      warn_once("cannot record event " + name_ + " in " + kFileVariable + "=" + path + ": " + std::strerror(errno));
      return;
    }
    const ssize_t n = ::write(fd, line.data(), line.size());
    if (n != static_cast<ssize_t>(line.size())) warn_once("event " + name_ + " not fully written to " + path);
    ::close(fd);
  } catch (const std::exception& e) {
    warn_once("event " + name_ + " not recorded: " + e.what());
  }
}

std::vector<Recorded> read_records(const std::string& path) {
  std::vector<Recorded> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("event") || !record["event"].is_string()) continue;
    records.push_back({record["event"].get<std::string>(), record.value("unix_us", int64_t{0}), std::move(record)});
  }
  std::stable_sort(records.begin(), records.end(), [](const Recorded& a, const Recorded& b) { return a.unix_us < b.unix_us; });
  return records;
}

}  // namespace ddx::events
