#pragma once
// A snapshot of the process environment as a map, so parsers are pure functions that tests
// can feed any environment without touching the real one.
#include <map>
#include <optional>
#include <string>

namespace ddx {

using EnvMap = std::map<std::string, std::string>;

// The current process environment.
EnvMap current_env();

// The value of `key`, or nullopt when unset. An empty value counts as set.
std::optional<std::string> env_get(const EnvMap& env, const std::string& key);

// Strict integer parsing for env vars and flags: the whole string must be a base-10 integer
// within [lo, hi]; otherwise throws UsageError naming `what` (e.g. "RANK") and the value.
long long parse_int(const std::string& what, const std::string& value, long long lo, long long hi);

}  // namespace ddx
