// Rank-prefixed logging to stderr and, optionally, one file per rank.
#include "ddx/text/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>

#include "ddx/text/clock_time.h"
#include "ddx/errors/errors.h"

namespace ddx::log {

std::string clock_time(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::snprintf(text, sizeof(text), "%02d:%02d:%02d.%03d", local.tm_hour, local.tm_min,
                local.tm_sec, static_cast<int>(millis));
  return text;
}

namespace {

struct State {
  std::mutex mutex;
  std::atomic<Level> level{Level::Info};
  std::optional<int> rank;  // guarded by mutex, like everything below
  int world_size = 0;
  int file_fd = -1;
  std::string file_path;
  std::string log_dir;  // from DDX_LOG_DIR; the file opens once the rank is known
};

State& the_state() {
  static State* s = new State;  // leaked on purpose: logging must work during static teardown
  return *s;
}

std::string short_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  std::string host(name);
  return host.substr(0, host.find('.'));  // "gpu001.cluster.example" -> "gpu001": lines stay short
}

char letter(Level level) {
  switch (level) {
    case Level::Debug: return 'D';
    case Level::Info: return 'I';
    case Level::Warn: return 'W';
    case Level::Error: return 'E';
  }
  return '?';
}

std::string timestamp() { return clock_time(std::chrono::system_clock::now()); }

// One write() per line in the normal case; the loop only finishes an interrupted or short write.
void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere left to report a failing log; dropping the line is all we can do
    done += static_cast<std::size_t>(n);
  }
}

// Caller holds the mutex.
void open_file_locked(State& s, const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw UsageError("cannot open log file '" + path + "': " + std::strerror(errno));
  if (s.file_fd >= 0) ::close(s.file_fd);
  s.file_fd = fd;
  s.file_path = path;
}

// Caller holds the mutex.
void open_rank_file_locked(State& s) {
  if (s.log_dir.empty() || !s.rank) return;
  const std::string path = s.log_dir + "/ddx-rank" + std::to_string(*s.rank) + ".log";
  if (path != s.file_path) open_file_locked(s, path);
}

}  // namespace

Level parse_level(const std::string& what, const std::string& text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "debug") return Level::Debug;
  if (lower == "info") return Level::Info;
  if (lower == "warn") return Level::Warn;
  if (lower == "error") return Level::Error;
  throw UsageError(what + "='" + text + "' is not one of debug, info, warn, error");
}

void set_rank(int rank, int world_size) {
  State& s = the_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.rank = rank;
  s.world_size = world_size;
  try {
    open_rank_file_locked(s);
  } catch (const UsageError& e) {
    // The directory existed a moment ago; losing the file must not stop the run.
    write_all(STDERR_FILENO, std::string("ddx: warning: ") + e.what() + "\n");
  }
}

void set_level(Level level) { the_state().level.store(level); }

Level level() { return the_state().level.load(std::memory_order_relaxed); }

void set_file(const std::string& path) {
  State& s = the_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  open_file_locked(s, path);
}

void configure_from_env() { configure_from_env(current_env()); }

void configure_from_env(const EnvMap& env) {
  if (const auto text = env_get(env, "DDX_LOG_LEVEL")) set_level(parse_level("DDX_LOG_LEVEL", *text));
  const auto dir = env_get(env, "DDX_LOG_DIR");
  if (!dir || dir->empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);
  if (ec) throw UsageError("DDX_LOG_DIR=" + *dir + ": cannot create directory: " + ec.message());
  State& s = the_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.log_dir = *dir;
  open_rank_file_locked(s);
}

void reset() {
  State& s = the_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.level.store(Level::Info);
  s.rank.reset();
  s.world_size = 0;
  if (s.file_fd >= 0) ::close(s.file_fd);
  s.file_fd = -1;
  s.file_path.clear();
  s.log_dir.clear();
}

void write(Level level, const std::string& message) {
  static const std::string host = short_hostname();
  const std::string pid = std::to_string(::getpid());  // not cached: a fork() child has its own
  const std::string when = timestamp();
  State& s = the_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // `ddx launch` recognises "[rank R/" at the start of a line and adds no "[rank R]: " of its own
  // (launcher/output_pump.cpp), so the console shows one rank label: keep the two in step.
  std::string line = s.rank ? "[rank " + std::to_string(*s.rank) + "/" +
                                  std::to_string(s.world_size) + " " + host + ":" + pid + "] "
                            : "[ddx " + host + ":" + pid + "] ";
  line += letter(level);
  line += ' ';
  line += when;
  line += ' ';
  line += message;
  if (line.empty() || line.back() != '\n') line += '\n';
  write_all(STDERR_FILENO, line);
  if (s.file_fd >= 0) write_all(s.file_fd, line);
}

}  // namespace ddx::log
