#include "faults/fault_spec.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "ddx/processes/env.h"
#include "ddx/errors/errors.h"
#include "faults/kind.h"

namespace ddx::faults {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

void FaultSpec::fail(const std::string& why) const { throw UsageError(source + " '" + text + "': " + why); }

std::string FaultSpec::text_param(const std::string& key, const std::string& fallback) const {
  auto it = params.find(key);
  return it == params.end() ? fallback : it->second;
}

double FaultSpec::number_param(const std::string& key, double fallback, double lo, double hi) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  double value = 0;
  size_t used = 0;
  try {
    value = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != it->second.size() || !std::isfinite(value)) fail(key + " '" + it->second + "' is not a number");
  if (value < lo || value > hi) {
    std::ostringstream range;
    range << key << " " << it->second << " is outside [" << lo << ", " << hi << "]";
    fail(range.str());
  }
  return value;
}

int64_t FaultSpec::int_param(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  return parse_int(source + " '" + text + "' " + key, it->second, lo, hi);
}

FaultSpec parse_spec(const std::string& text, const std::string& source) {
  FaultSpec s;
  s.text = text;
  s.source = source;
  const size_t at = text.find('@');
  s.kind = text.substr(0, at);
  const Kind* kind = find_kind(s.kind);
  if (!kind) s.fail("unknown fault kind '" + s.kind + "' (valid kinds: " + kind_names() + ")");
  std::vector<std::string> allowed = kind->keys();
  if (at != std::string::npos) {
    for (const std::string& item : split(text.substr(at + 1), ',')) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) s.fail("'" + item + "' is not key=value");
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      const std::string what = source + " '" + text + "' " + key;
      if (key == "rank") {
        s.rank = static_cast<int>(parse_int(what, value, 0, 1 << 20));
      } else if (key == "step") {
        s.step = parse_int(what, value, 1, int64_t{1} << 40);
      } else if (key == "attempt") {
        s.attempt = value == "all" ? -1 : static_cast<int>(parse_int(what, value, 0, 1 << 20));
      } else if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) {
        s.params[key] = value;
      } else {
        std::string keys = "rank, step, attempt";
        for (const auto& k : allowed) keys += ", " + k;
        s.fail(s.kind + " takes the keys " + keys + ", not '" + key + "'");
      }
    }
  }
  kind->check(s);
  return s;
}

std::vector<FaultSpec> parse_list(const std::string& text, const std::string& source) {
  std::vector<FaultSpec> out;
  for (const std::string& item : split(text, ';')) out.push_back(parse_spec(item, source));
  return out;
}

}  // namespace ddx::faults
