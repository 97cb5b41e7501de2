#include "harness/fault_matrix/matrix_exchange.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ddx/processes/atomic_file.h"
#include "harness/fault_matrix/matrix_nodes.h"

namespace ddx::faults::matrix {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

// Console text may hold bytes that are not UTF-8; they travel replaced.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The flight-recorder dumps of this node's ranks, by their path under traces/.
json trace_files(const std::string& dir) {
  json files = json::object();
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir + "/traces", ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) files[fs::relative(it->path(), dir + "/traces").string()] = read_bytes(it->path());
  }
  return files;
}

}  // namespace

std::string agree_to_run(const Options& o, const std::string& name, const std::string& my_reason,
                         const std::string& shared_dir) {
  if (o.nodes == nullptr) return my_reason;
  if (o.node_rank == 0) {
    std::error_code ec;
    fs::remove_all(shared_dir, ec);
  }
  const auto reasons = o.nodes->gather("run/" + name, my_reason);
  std::string refused;
  for (size_t node = 0; node < reasons.size(); ++node) {
    if (reasons[node].empty()) continue;
    refused += (refused.empty() ? "" : "; ") + std::string("node ") + std::to_string(node) + ": " + reasons[node];
  }
  return o.nodes->broadcast("run-answer/" + name, refused);
}

void merge_parts(const Options& o, const std::string& name, ProcessOutcome& outcome, JobEvidence& evidence,
                 int& leftover) {
  if (o.nodes == nullptr) return;
  json mine = {{"exit_code", outcome.exit_code}, {"timed_out", outcome.timed_out}, {"seconds", outcome.seconds},
               {"leftover", leftover}, {"events", json::array()}, {"traces", json::object()}};
  if (o.node_rank != 0) {
    for (const JobEvent& e : evidence.events) mine["events"].push_back(e.record);
    mine["traces"] = trace_files(evidence.dir);
  }
  const auto parts = o.nodes->gather("evidence/" + name, dump(mine));
  for (size_t node = 1; node < parts.size(); ++node) {
    const json part = json::parse(parts[node]);
    if (outcome.exit_code == 0) outcome.exit_code = part.at("exit_code").get<int>();
    outcome.timed_out = outcome.timed_out || part.at("timed_out").get<bool>();
    outcome.seconds = std::max(outcome.seconds, part.at("seconds").get<double>());
    leftover += part.at("leftover").get<int>();
    for (const auto& record : part.at("events")) {
      evidence.events.push_back({record.at("event").get<std::string>(), record.value("unix_us", int64_t{0}), record});
    }
    for (const auto& [path, bytes] : part.at("traces").items()) {
      const fs::path target = fs::path(evidence.dir) / "traces" / path;
      fs::create_directories(target.parent_path());
      write_file_atomically(target.string(), bytes.get<std::string>());
    }
  }
  std::stable_sort(evidence.events.begin(), evidence.events.end(),
                   [](const JobEvent& a, const JobEvent& b) { return a.unix_us < b.unix_us; });
}

std::string share_verdict(const Options& o, const std::string& name, const std::string& verdict) {
  return o.nodes == nullptr ? verdict : o.nodes->broadcast("verdict/" + name, verdict);
}

}  // namespace ddx::faults::matrix
