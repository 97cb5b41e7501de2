#pragma once
// Files ddx writes are replaced atomically: a temp file in the same folder, fsync, rename, so
// a crash never leaves a half-written report and an old file is never truncated first.
#include <string>

namespace ddx {

// Writes `content` to `path` atomically (creating missing parent folders). Throws
// std::runtime_error naming the path and the OS error.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace ddx
