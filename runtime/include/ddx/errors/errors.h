#pragma once
// Error kinds that decide a process's exit code.
#include <stdexcept>
#include <string>

namespace ddx {

// Bad user input (a flag, an env var, a file, a config). The front end prints
// "ddx: error: <what>" on one line and exits with kExitUsage; nothing is written.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr int kExitUsage = 2;

}  // namespace ddx
