// Environment snapshot and strict integer parsing shared by the rendezvous, logging and flags.
#include "ddx/processes/env.h"

#include <cerrno>
#include <cstdlib>

#include "ddx/errors/errors.h"

extern char** environ;

namespace ddx {

EnvMap current_env() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto eq = text.find('=');
    if (eq == std::string::npos) continue;  // not "KEY=VALUE": nothing a lookup could want
    env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return env;
}

std::optional<std::string> env_get(const EnvMap& env, const std::string& key) {
  const auto it = env.find(key);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

long long parse_int(const std::string& what, const std::string& value, long long lo, long long hi) {
  // strtoll alone accepts leading blanks, trailing junk and "0x"; a rank of " 1" or "1abc" is a
  // broken launcher script, so only an optional '-' followed by decimal digits is accepted.
  const std::size_t digits_from = (!value.empty() && value[0] == '-') ? 1 : 0;
  bool well_formed = value.size() > digits_from;
  for (std::size_t i = digits_from; well_formed && i < value.size(); ++i) {
    well_formed = value[i] >= '0' && value[i] <= '9';
  }
  if (!well_formed) throw UsageError(what + "='" + value + "' is not an integer");

  errno = 0;
  const long long parsed = std::strtoll(value.c_str(), nullptr, 10);
  if (errno == ERANGE || parsed < lo || parsed > hi) {
    throw UsageError(what + "=" + value + " is outside " + std::to_string(lo) + ".." +
                     std::to_string(hi));
  }
  return parsed;
}

}  // namespace ddx
