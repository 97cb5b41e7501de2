#pragma once
// Rank-prefixed logging: "[rank 3/8 host:pid] I 14:02:11.123 message". Thread-safe; each line
// is written with one write() so lines of concurrent ranks sharing a terminal do not interleave.
#include <optional>
#include <sstream>
#include <string>

#include "ddx/processes/env.h"

namespace ddx::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

// Parses "debug|info|warn|error" (case-insensitive); throws UsageError naming `what` otherwise.
Level parse_level(const std::string& what, const std::string& text);

// Sets the prefix's rank and world (before this, lines say "[ddx host:pid]").
void set_rank(int rank, int world_size);
void set_level(Level level);
Level level();
// Also append every line to `path` (one file per rank when the caller puts the rank in it).
// Throws UsageError when the file cannot be opened.
void set_file(const std::string& path);
// Reads DDX_LOG_LEVEL and DDX_LOG_DIR (file <dir>/ddx-rank<R>.log) from the environment.
// The directory is created if missing. Call in any order with set_rank: the file is opened once
// both the directory and the rank are known (lines before that go to stderr only), and a later
// set_rank with another rank switches to that rank's file. Throws UsageError naming the
// variable for a bad level or a directory that cannot be created.
void configure_from_env();
void configure_from_env(const EnvMap& env);
// Back to the start-up state (no rank, info level, no file, no log dir); for tests.
void reset();

void write(Level level, const std::string& message);

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename... Args> void debug(const Args&... a) { if (level() <= Level::Debug) write(Level::Debug, concat(a...)); }
template <typename... Args> void info(const Args&... a) { if (level() <= Level::Info) write(Level::Info, concat(a...)); }
template <typename... Args> void warn(const Args&... a) { if (level() <= Level::Warn) write(Level::Warn, concat(a...)); }
template <typename... Args> void error(const Args&... a) { write(Level::Error, concat(a...)); }

}  // namespace ddx::log
