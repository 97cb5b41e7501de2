#pragma once
// Helpers shared by the ddx_data tests: scratch folders under the build tree, small files.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "ddx/errors/errors.h"

namespace ddx::data::testing {

namespace fs = std::filesystem;

// A fresh folder under <build>/test-scratch, removed by the destructor.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::path(DDX_BINARY_DIR) / "test-scratch" / (name + "." + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The message of the UsageError `fn` throws, or "(no UsageError)".
inline std::string usage_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

// rank0_first for a single process: just run the function.
inline void run_now(const std::function<void()>& fn) { fn(); }

}  // namespace ddx::data::testing
