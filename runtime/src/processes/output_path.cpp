#include "ddx/processes/output_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ddx/errors/errors.h"

namespace ddx {
namespace {

namespace fs = std::filesystem;

// The nearest path on the way to `path` that exists: `path` itself, a parent, or "." for a
// relative path none of whose folders exists yet.
fs::path nearest_existing(const fs::path& path) {
  std::error_code ec;
  fs::path p = path;
  while (!p.empty() && !fs::exists(p, ec)) {
    const fs::path parent = p.parent_path();
    if (parent == p) break;  // the root
    p = parent;
  }
  return p.empty() ? fs::path(".") : p;
}

// Why no new file can be made in `folder` (an existing path), or "" when one can. Tried for
// real, with a temp file removed at once: access(2) answers yes to root even on /proc or a
// read-only mount.
std::string cannot_create_in(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return folder.string() + " is a file, not a folder";
  std::string probe = (folder / ".ddx-write-check.XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return folder.string() + " does not take new files (" + std::strerror(errno) + ")";
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

[[noreturn]] void refuse(const std::string& flag, const std::string& path, const std::string& reason) {
  throw UsageError(flag + " " + path + " cannot be written: " + reason);
}

}  // namespace

void check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) refuse(flag, path, "it is a folder");
  // The file is replaced by a rename in its folder, so it is the folder that must take a file.
  const fs::path parent = fs::path(path).parent_path();
  if (const std::string why = cannot_create_in(nearest_existing(parent.empty() ? "." : parent)); !why.empty()) {
    refuse(flag, path, why);
  }
}

void check_output_folder(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  if (const std::string why = cannot_create_in(nearest_existing(path)); !why.empty()) refuse(flag, path, why);
}

}  // namespace ddx
