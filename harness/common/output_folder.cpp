#include "harness/common/output_folder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"

namespace ddx::harness {
namespace fs = std::filesystem;
namespace {

// The folder's last change (its newest entry's creation): when the run that left it wrote last.
// Read before check_output_folder(), whose write check adds and removes a file in the folder
// and so makes its last change "now".
std::time_t last_change(const fs::path& dir) {
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 ? st.st_mtime : std::time(nullptr);
}

std::string time_text(std::time_t t) {
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", std::localtime(&t));
  return text;
}

// True when `dir` is the current folder or one above it: moving it would move this process's
// own working folder, and relative paths would then point into the moved copy.
bool holds_current_folder(const fs::path& dir) {
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(dir, ec);
  if (ec) return false;
  for (fs::path p = fs::current_path(ec); !ec && !p.empty(); p = p.parent_path()) {
    if (p == target) return true;
    if (p == p.parent_path()) break;
  }
  return false;
}

// <dir>.previous-<time>, or with -2, -3, ... when a run of the same second was moved already.
std::string free_previous_name(const fs::path& dir, std::time_t changed) {
  std::string base = dir.lexically_normal().string();
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string stem = base + ".previous-" + time_text(changed);
  std::error_code ec;
  std::string name = stem;
  for (int n = 2; fs::exists(name, ec); ++n) name = stem + "-" + std::to_string(n);
  return name;
}

}  // namespace

std::string fresh_output_folder(const std::string& flag, const std::string& dir) {
  const std::time_t changed = last_change(dir);
  check_output_folder(flag, dir);  // a file in its place, or a folder that takes no files: one line
  std::error_code ec;
  std::string moved;
  if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec)) {
    if (holds_current_folder(dir)) {
      throw UsageError(flag + " " + dir + " holds the current folder and an earlier run's files: name a folder of its own");
    }
    moved = free_previous_name(dir, changed);
    if (std::rename(dir.c_str(), moved.c_str()) != 0) {
      throw UsageError(flag + " " + dir + " holds an earlier run's files and cannot be moved aside to " + moved + " (" +
                       std::strerror(errno) + ")");
    }
  }
  fs::create_directories(dir, ec);
  if (ec) throw UsageError(flag + " " + dir + " cannot be written: " + ec.message());
  return moved;
}

}  // namespace ddx::harness
