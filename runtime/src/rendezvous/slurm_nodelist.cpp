// SLURM's compressed notations: host lists ("gpu[001-004,010],cpu7"), tasks per node
// ("2(x3),1") and the guide's master-port convention. Same results as `scontrol show hostnames`
// for the forms SLURM prints, so ddx needs no SLURM binaries on the compute node.
#include <cstddef>
#include <string>
#include <vector>

#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx {
namespace {

// A typo such as "n[1-100000000]" must fail, not allocate gigabytes.
constexpr std::size_t kMaxHosts = 100000;

[[noreturn]] void bad_nodelist(const std::string& nodelist, const std::string& why) {
  throw UsageError("malformed SLURM node list '" + nodelist + "': " + why);
}

bool all_digits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Splits at commas that are not inside brackets.
std::vector<std::string> split_top_level(const std::string& nodelist) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') {
      if (++depth > 1) bad_nodelist(nodelist, "nested '['");
    } else if (c == ']') {
      if (--depth < 0) bad_nodelist(nodelist, "']' without '['");
    }
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) bad_nodelist(nodelist, "'[' without ']'");
  items.push_back(current);
  return items;
}

// "001-004,010" -> {"001","002","003","004","010"}; a range keeps the width of its start.
std::vector<std::string> expand_bracket(const std::string& nodelist, const std::string& body) {
  std::vector<std::string> values;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = body.find(',', begin);
    const std::string part = body.substr(begin, comma == std::string::npos ? std::string::npos
                                                                            : comma - begin);
    if (part.empty()) bad_nodelist(nodelist, "empty item in '[" + body + "]'");
    const std::size_t dash = part.find('-');
    if (dash == std::string::npos) {
      if (!all_digits(part)) bad_nodelist(nodelist, "'" + part + "' is not a number");
      values.push_back(part);
    } else {
      const std::string first = part.substr(0, dash);
      const std::string last = part.substr(dash + 1);
      // 18 digits always fit a long long, which keeps the arithmetic below exact.
      if (!all_digits(first) || !all_digits(last) || first.size() > 18 || last.size() > 18) {
        bad_nodelist(nodelist, "'" + part + "' is not a range of numbers");
      }
      const long long lo = std::stoll(first);
      const long long hi = std::stoll(last);
      if (lo > hi) bad_nodelist(nodelist, "range '" + part + "' is reversed");
      if (static_cast<unsigned long long>(hi - lo) >= kMaxHosts) {
        bad_nodelist(nodelist, "range '" + part + "' is too large");
      }
      for (long long n = lo; n <= hi; ++n) {
        std::string digits = std::to_string(n);
        if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
        values.push_back(digits);
      }
    }
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return values;
}

// One host item, e.g. "r[1-2]n[01-02]": every bracket multiplies the names built so far.
void expand_item(const std::string& nodelist, const std::string& item,
                 std::vector<std::string>& hosts) {
  std::vector<std::string> names{""};
  std::size_t pos = 0;
  while (pos < item.size()) {
    const std::size_t open = item.find('[', pos);
    const std::string literal = item.substr(pos, open == std::string::npos ? std::string::npos
                                                                           : open - pos);
    for (auto& name : names) name += literal;
    if (open == std::string::npos) break;
    const std::size_t close = item.find(']', open);  // balanced: split_top_level checked
    const auto suffixes = expand_bracket(nodelist, item.substr(open + 1, close - open - 1));
    if (names.size() * suffixes.size() + hosts.size() > kMaxHosts) {
      bad_nodelist(nodelist, "expands to more than " + std::to_string(kMaxHosts) + " hosts");
    }
    std::vector<std::string> product;
    product.reserve(names.size() * suffixes.size());
    for (const auto& name : names) {
      for (const auto& suffix : suffixes) product.push_back(name + suffix);
    }
    names.swap(product);
    pos = close + 1;
  }
  hosts.insert(hosts.end(), names.begin(), names.end());
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(const std::string& nodelist) {
  if (nodelist.empty()) bad_nodelist(nodelist, "empty");
  std::vector<std::string> hosts;
  for (const auto& item : split_top_level(nodelist)) {
    if (item.empty()) bad_nodelist(nodelist, "empty host name");
    if (item[0] == '[') bad_nodelist(nodelist, "host name starts with '['");
    expand_item(nodelist, item, hosts);
  }
  return hosts;
}

std::vector<int> expand_slurm_tasks_per_node(const std::string& spec) {
  const auto bad = [&spec](const std::string& why) {
    throw UsageError("malformed SLURM tasks per node '" + spec + "': " + why);
  };
  // Caps keep a garbled value from allocating much: no real node runs 10^6 tasks.
  const auto number = [&bad](const std::string& text) {
    if (!all_digits(text) || text.size() > 6) bad("'" + text + "' is not a number");
    const int n = std::stoi(text);
    if (n < 1) bad("'" + text + "' must be at least 1");
    return n;
  };
  std::vector<int> tasks;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = spec.find(',', begin);
    const std::string item = spec.substr(begin, comma == std::string::npos ? std::string::npos
                                                                            : comma - begin);
    if (item.empty()) bad("empty item");
    const std::size_t paren = item.find('(');
    if (paren == std::string::npos) {
      tasks.push_back(number(item));
    } else {
      // "N(xM)": M nodes with N tasks each.
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        bad("'" + item + "' is neither N nor N(xM)");
      }
      const int per_node = number(item.substr(0, paren));
      const int repeat = number(item.substr(paren + 2, item.size() - paren - 3));
      if (tasks.size() + repeat > kMaxHosts) bad("more than " + std::to_string(kMaxHosts) + " nodes");
      tasks.insert(tasks.end(), repeat, per_node);
    }
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return tasks;
}

int slurm_master_port(const std::string& job_id) {
  if (!all_digits(job_id)) throw UsageError("SLURM_JOB_ID='" + job_id + "' is not a job number");
  const std::string last4 = job_id.size() > 4 ? job_id.substr(job_id.size() - 4) : job_id;
  return 5000 + std::stoi(last4);
}

}  // namespace ddx
