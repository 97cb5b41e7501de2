#pragma once
// Output paths a command is given are checked before it does any work, so a path that cannot be
// written is one line naming the flag (exit 2), not a crash after minutes of work or a result
// lost in a stack trace.
#include <string>

namespace ddx {

// `path` can be written as a file (by write_file_atomically, which creates missing folders): it
// is not a folder, no file stands where a folder must be, and the nearest existing folder on the
// way takes a new file. Nothing is created. Throws UsageError
// "<flag> <path> cannot be written: <reason>". An empty path (no output asked for) passes.
void check_output_file(const std::string& flag, const std::string& path);

// The same for a folder the command will create (if missing) and write files into.
void check_output_folder(const std::string& flag, const std::string& path);

}  // namespace ddx
