// Gathers every rank's results through the store and prints rank 0's table: one row per op,
// PASS or the first failure (rank, dtype, size, offset, got vs expected).
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ddx/processes/atomic_file.h"
#include "ddx/store_gather.h"
#include "selfcheck.h"

namespace ddx::probes {
namespace {

using nlohmann::json;

json to_json(const CheckResult& r) {
  json j = {{"op", r.op}, {"dtype", r.dtype}, {"size", r.size}, {"wrong", r.wrong},
            {"seconds", r.seconds}};
  if (r.root >= 0) j["root"] = r.root;
  if (r.wrong > 0) {
    j["first_offset"] = r.first_offset;
    j["got"] = r.got;
    j["expected"] = r.expected;
  }
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

std::string join(const std::set<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string join_sizes(const std::set<int64_t>& items) {
  std::string out;
  for (auto s : items) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

struct OpSummary {
  std::set<std::string> dtypes;
  std::set<int64_t> sizes;
  int checks = 0;
  int failed = 0;
  double seconds = 0;
  std::string first_failure;
};

}  // namespace

int report_selfcheck(World& world, const std::vector<CheckResult>& mine,
                     const SelfcheckOptions& options, double seconds) {
  json payload = {{"rank", world.rank()}, {"host", world.info().hostname}, {"checks", json::array()}};
  for (const auto& r : mine) payload["checks"].push_back(to_json(r));
  const std::vector<std::string> texts = gather_on_rank0(world, "selfcheck", payload.dump());
  if (world.rank() != 0) return agree_on_verdict(world, "selfcheck", 0, "");
  json all = json::array();
  for (const auto& text : texts) all.push_back(json::parse(text));

  // Hosts and the rank ranges on each.
  std::map<std::string, std::vector<int>> hosts;
  for (const auto& rank : all) hosts[rank["host"].get<std::string>()].push_back(rank["rank"].get<int>());
  std::ostringstream host_line;
  for (const auto& [host, ranks] : hosts) {
    host_line << (host_line.tellp() > 0 ? ", " : "") << host << " (" << ranks.size() << " rank"
              << (ranks.size() == 1 ? "" : "s") << ")";
  }

  // One row per op, in the order the ops ran on rank 0.
  std::vector<std::string> order;
  std::map<std::string, OpSummary> ops;
  int total = 0, failed = 0;
  for (const auto& rank : all) {
    const int rank_id = rank["rank"].get<int>();
    for (const auto& c : rank["checks"]) {
      const std::string op = c["op"].get<std::string>();
      if (!ops.count(op)) order.push_back(op);
      OpSummary& s = ops[op];
      s.dtypes.insert(c["dtype"].get<std::string>());
      if (c["size"].get<int64_t>() > 0) s.sizes.insert(c["size"].get<int64_t>());
      ++s.checks;
      ++total;
      s.seconds = std::max(s.seconds, 0.0) + (rank_id == 0 ? c["seconds"].get<double>() : 0.0);
      const bool bad = c["wrong"].get<int64_t>() > 0 || c.contains("error");
      if (!bad) continue;
      ++s.failed;
      ++failed;
      if (!s.first_failure.empty()) continue;
      std::ostringstream f;
      f << "rank " << rank_id << " " << c["dtype"].get<std::string>() << " n=" << c["size"].get<int64_t>();
      if (c.contains("root")) f << " root " << c["root"].get<int>();
      if (c.contains("error")) {
        f << ": " << c["error"].get<std::string>();
      } else {
        f << ": offset " << c["first_offset"].get<int64_t>() << " got " << c["got"].get<double>()
          << " expected " << c["expected"].get<double>() << " (" << c["wrong"].get<int64_t>()
          << " wrong)";
      }
      s.first_failure = f.str();
    }
  }
  // A rank that stopped early (an op threw) ran fewer checks: say so instead of hiding it.
  const size_t expected_checks = all[0]["checks"].size();
  for (const auto& rank : all) {
    if (rank["checks"].size() != expected_checks) ++failed;
  }

  const auto& info = world.info();
  std::printf("ddx probe selfcheck: %d rank%s on %zu host%s [%s], device %s, rendezvous via %s\n",
              world.size(), world.size() == 1 ? "" : "s", hosts.size(), hosts.size() == 1 ? "" : "s",
              host_line.str().c_str(), options.device.c_str(), to_string(info.source));
  std::printf("%-20s %-40s %-20s %7s  %-6s %9s  %s\n", "op", "dtypes", "sizes (elements)", "checks",
              "result", "time(ms)", "first failure");
  for (const auto& op : order) {
    const OpSummary& s = ops[op];
    std::printf("%-20s %-40s %-20s %7d  %-6s %9.1f  %s\n", op.c_str(), join(s.dtypes).c_str(),
                join_sizes(s.sizes).c_str(), s.checks, s.failed ? "FAIL" : "PASS", s.seconds * 1e3,
                s.first_failure.c_str());
  }
  char summary[256];
  std::snprintf(summary, sizeof summary, "selfcheck: %zu ops, %d checks over %d ranks, %s (%.2f s)", order.size(), total,
                world.size(), failed ? (std::to_string(failed) + " FAILED").c_str() : "all PASS", seconds);
  std::printf("%s\n", summary);
  std::fflush(stdout);
  // The verdict every rank ends with: the summary and the first failure of each op that failed.
  std::string verdict = summary;
  for (const auto& op : order) {
    if (ops[op].failed) verdict += "; " + op + ": " + ops[op].first_failure;
  }

  if (!options.json_path.empty()) {
    json report = {{"world_size", world.size()}, {"device", options.device},
                   {"rendezvous", to_string(info.source)}, {"passed", failed == 0},
                   {"checks", total}, {"failed", failed}, {"seconds", seconds}, {"ranks", all}};
    write_file_atomically(options.json_path, report.dump(2) + "\n");
  }
  return agree_on_verdict(world, "selfcheck", failed == 0 ? 0 : 1, verdict);
}

}  // namespace ddx::probes
