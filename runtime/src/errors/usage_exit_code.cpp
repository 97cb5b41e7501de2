#include "ddx/errors/usage_exit_code.h"

#include <map>

namespace ddx::cli {

namespace {
std::map<const CLI::App*, int>& usage_exit_codes() {
  static std::map<const CLI::App*, int> codes;
  return codes;
}
}  // namespace

void set_usage_exit_code(const CLI::App& subcommand, int code) { usage_exit_codes()[&subcommand] = code; }

std::optional<int> declared_usage_exit_code(const CLI::App& subcommand) {
  const auto it = usage_exit_codes().find(&subcommand);
  if (it == usage_exit_codes().end()) return std::nullopt;
  return it->second;
}

}  // namespace ddx::cli
