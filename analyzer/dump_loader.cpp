// Reading flight recorder dumps. Files are written atomically, but they get copied around,
// cut off by full disks and mixed with older runs: say whose, use what is usable.
#include "analyzer/dump_loader.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "analyzer/analysis_util.h"
#include "analyzer/dump_value.h"
#include "analyzer/pickle_value.h"
#include "analyzer/pytorch_dump.h"
#include "ddx/errors/errors.h"

namespace ddx::analyze {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kSupportedVersion = 1;
constexpr const char* kEntriesMarker = ",\n\"entries\":[";

GroupPosition position_from(const json& g) {
  GroupPosition p;
  p.ranks = g.value("ranks", std::vector<int>{});
  p.last_enqueued = g.value("last_enqueued", uint64_t{0});
  p.last_started = g.value("last_started", uint64_t{0});
  p.last_completed = g.value("last_completed", uint64_t{0});
  p.last_enqueued_p2p = g.value("last_enqueued_p2p", uint64_t{0});
  p.last_completed_p2p = g.value("last_completed_p2p", uint64_t{0});
  p.in_flight = g.value("in_flight", 0);
  return p;
}

// The compact form heartbeats use: [enqueued, started, completed, in_flight, enq_p2p, done_p2p].
GroupPosition position_from_array(const json& a) {
  GroupPosition p;
  if (!a.is_array() || a.size() < 6) return p;
  p.last_enqueued = a[0].get<uint64_t>();
  p.last_started = a[1].get<uint64_t>();
  p.last_completed = a[2].get<uint64_t>();
  p.in_flight = a[3].get<int>();
  p.last_enqueued_p2p = a[4].get<uint64_t>();
  p.last_completed_p2p = a[5].get<uint64_t>();
  return p;
}

Entry entry_from(const json& e) {
  Entry x;
  x.id = e.value("id", uint64_t{0});
  x.group = e.value("group", std::string());
  x.group_ranks = e.value("group_ranks", std::vector<int>{});
  x.seq = e.value("seq", uint64_t{0});
  x.p2p = e.value("p2p", false);
  x.op = e.value("op", std::string());
  x.reduce_op = e.value("reduce_op", std::string());
  x.dtype = e.value("dtype", std::string());
  x.in_shape = e.value("in_shape", std::vector<int64_t>{});
  x.out_shape = e.value("out_shape", std::vector<int64_t>{});
  x.numel = e.value("numel", int64_t{0});
  x.peer = e.value("peer", -1);
  x.backend = e.value("backend", std::string());
  x.call_site = e.value("call_site", std::string());
  x.state = e.value("state", std::string());
  x.error = e.value("error", std::string());
  x.enqueue_us = e.value("enqueue_us", int64_t{0});
  x.start_us = e.value("start_us", int64_t{0});
  x.end_us = e.value("end_us", int64_t{0});
  return x;
}

void read_header(const json& doc, RankDump& d) {
  if (!doc.is_object() || doc.value("format", std::string()) != "ddx-flight-recorder") {
    throw std::runtime_error("not a ddx flight recorder dump (no \"format\": \"ddx-flight-recorder\")");
  }
  const int version = doc.value("version", 0);
  if (version != kSupportedVersion) {
    throw std::runtime_error("dump format version " + std::to_string(version) +
                             " (this ddx reads version " + std::to_string(kSupportedVersion) + ")");
  }
  d.rank = doc.value("rank", -1);
  d.local_rank = doc.value("local_rank", 0);
  d.world_size = doc.value("world_size", 0);
  d.host = doc.value("host", std::string());
  d.pid = doc.value("pid", 0);
  d.job_id = doc.value("job_id", std::string());
  d.reason = doc.value("reason", std::string());
  for (const auto& t : doc.value("triggers", json::array())) d.triggers.push_back(t.value("reason", std::string()));
  d.dump_unix_ms = doc.value("dump_unix_ms", int64_t{0});
  d.dump_steady_us = doc.value("dump_steady_us", int64_t{0});
  d.heartbeat_unix_ms = doc.value("heartbeat_unix_ms", int64_t{0});
  d.last_event_unix_ms = doc.value("last_event_unix_ms", int64_t{0});
  d.collective_timeout_ms = doc.value("collective_timeout_ms", int64_t{0});
  d.capacity = doc.value("capacity", uint64_t{0});
  d.recorded_total = doc.value("recorded_total", uint64_t{0});
  // (value() returns a copy: keep it alive while iterating over its items)
  const json groups = doc.value("groups", json::object());
  for (const auto& [name, g] : groups.items()) d.groups[name] = position_from(g);
  const json peers = doc.value("peers", json::object());
  d.peers_error = peers.value("error", std::string());
  d.store_failing_ms = peers.value("store_failing_ms", int64_t{0});
  d.declared_dead = peers.value("declared_dead", std::vector<int>{});
  const json peer_ranks = peers.value("ranks", json::object());
  for (const auto& [key, p] : peer_ranks.items()) {
    PeerView v;
    v.silent_ms = p.value("silent_ms", int64_t{-1});
    const json hb = p.value("heartbeat", json::object());
    if (hb.is_object()) {
      v.host = hb.value("host", std::string());
      v.pid = hb.value("pid", 0);
      v.op = hb.value("op", std::string());
      v.idle_ms = hb.value("idle_ms", int64_t{-1});
      const json hb_groups = hb.value("groups", json::object());
      for (const auto& [name, g] : hb_groups.items()) v.groups[name] = position_from_array(g);
    }
    d.peers[std::stoi(key)] = std::move(v);
  }
}

std::string parse_error_text(const std::string& what) {
  // nlohmann's messages start with "[json.exception.parse_error.101] "; keep the useful part.
  const size_t close = what.find("] ");
  return close == std::string::npos ? what : what.substr(close + 2);
}

}  // namespace

RankDump parse_dump(const std::string& text, const std::string& path) {
  RankDump d;
  d.path = path;
  if (text.empty()) throw std::runtime_error("empty file");
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_discarded()) {
    read_header(doc, d);
    for (const auto& e : doc.value("entries", json::array())) d.entries.push_back(entry_from(e));
    return d;
  }
  // Salvage: the header is everything before the entries, and each entry is one line.
  const size_t marker = text.find(kEntriesMarker);
  if (marker == std::string::npos) {
    try {
      json ignored = json::parse(text);
    } catch (const std::exception& e) {
      throw std::runtime_error("not valid JSON (" + parse_error_text(e.what()) + ")");
    }
    throw std::runtime_error("not valid JSON");
  }
  json header = json::parse(text.substr(0, marker) + "}", nullptr, false);
  if (header.is_discarded()) throw std::runtime_error("truncated before the end of its header");
  read_header(header, d);
  d.truncated = true;
  std::istringstream lines(text.substr(marker + std::string(kEntriesMarker).size()));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    if (line.back() == ',') line.pop_back();
    json e = json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object()) break;  // the cut-off line, or the closing "]}"
    d.entries.push_back(entry_from(e));
  }
  return d;
}

namespace {

// The rank a dump's file name ends in: "ddx-fr-rank3.json", "nccl_trace_rank_3",
// "comm_lib_trace_rank_3.pkl"; with a prefix, the name must be the prefix and the number.
std::optional<int> rank_in_name(const std::string& file, const std::string& prefix) {
  static const std::regex any(R"(^(.*?)([0-9]+)(\.(json|pkl|pickle))?$)");
  std::smatch m;
  if (!std::regex_match(file, m, any)) return std::nullopt;
  if (!prefix.empty() && m[1].str() != prefix) return std::nullopt;
  if (m[2].length() > 9) return std::nullopt;
  return std::stoi(m[2]);
}

int64_t modified_unix_us(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
}

// The whole file in one read of its size (a stream copy grows its buffer a dozen times per
// dump, which shows at a thousand dumps).
std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot be read");
  const std::streamoff size = in.tellg();
  std::string bytes(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size)) throw std::runtime_error("cannot be read");
  return bytes;
}

// One file, whatever wrote it: ddx's JSON, PyTorch's pickle or PyTorch's JSON.
RankDump read_any_dump(const fs::path& path, int rank) {
  const std::string text = file_bytes(path);
  if (text.empty()) throw std::runtime_error("empty file");
  if (looks_like_pickle(text)) {
    RankDump d;
    read_pickle(text, [&](const DumpValue& doc) {
      if (!is_pytorch_dump(doc)) throw std::runtime_error("a pickle, but not a PyTorch flight recorder dump");
      d = read_pytorch_dump(doc, rank, path.string(), modified_unix_us(path));
    });
    return d;
  }
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_discarded() && is_pytorch_dump(json_value(doc))) {
    return read_pytorch_dump(json_value(doc), rank, path.string(), modified_unix_us(path));
  }
  return parse_dump(text, path.string());
}

struct ReadResult {
  RankDump dump;
  std::string error;  // why the file could not be used; empty when `dump` holds it
};

std::vector<ReadResult> read_all(const std::vector<std::pair<int, fs::path>>& files) {
  std::vector<ReadResult> out(files.size());
  detail::for_each_index_in_parallel(files.size(), [&](size_t i) {
    try {
      out[i].dump = read_any_dump(files[i].second, files[i].first);
    } catch (const std::exception& e) {
      out[i].error = e.what();
      if (out[i].error.empty()) out[i].error = "unreadable";
    }
  });
  return out;
}

// A pickle ddx wrote beside its own JSON dump of the same moment.
bool is_ddx_twin(const RankDump& json_dump, const RankDump& pickle) {
  return json_dump.format == "ddx" && pickle.written_by_ddx &&
         json_dump.pid == pickle.pid && json_dump.host == pickle.host;
}

// PyTorch's dumps carry no job id. One left in the folder by another run shows as a world group
// of another size than most dumps', or as a dump taken far apart from the others (the ranks of
// one hang dump within a few timeouts of each other).
bool without_job_id(const RankDump& d) { return d.format.rfind("pytorch", 0) == 0 && d.job_id.empty(); }

struct PytorchRun {
  std::map<int, int> size_votes;  // world size -> dumps that say it
  int common_size = 0, most = 0;
  int64_t median_dump_ms = 0;
  int64_t gap_ms = 0;              // dumps further from the median than this are another run's
};

PytorchRun pytorch_run_of(const std::map<int, RankDump>& parsed) {
  PytorchRun run;
  std::vector<int64_t> times;
  int64_t timeout_ms = 0;
  for (const auto& [rank, d] : parsed) {
    if (!without_job_id(d)) continue;
    if (d.world_size > 0) ++run.size_votes[d.world_size];
    times.push_back(d.dump_unix_ms);
    timeout_ms = std::max(timeout_ms, d.collective_timeout_ms);
  }
  for (const auto& [size, votes] : run.size_votes) {
    if (votes > run.most) run.common_size = size, run.most = votes;
  }
  std::sort(times.begin(), times.end());
  run.median_dump_ms = times.empty() ? 0 : times[times.size() / 2];
  run.gap_ms = std::max<int64_t>(3600 * 1000, 4 * timeout_ms);
  return run;
}

// Why `d` is another run's than most dumps, or "" when it fits.
std::string other_pytorch_run(const PytorchRun& run, const RankDump& d) {
  if (!without_job_id(d)) return "";
  const int votes = run.size_votes.count(d.world_size) ? run.size_votes.at(d.world_size) : 0;
  if (d.world_size > 0 && run.common_size > 0 && d.world_size != run.common_size && votes < run.most) {
    return "its world group has " + std::to_string(d.world_size) + " ranks, most dumps' " +
           std::to_string(run.common_size);
  }
  const int64_t off = d.dump_unix_ms - run.median_dump_ms;
  if (std::llabs(off) > run.gap_ms) {
    char hours[32];
    std::snprintf(hours, sizeof hours, "%.1f h", std::llabs(off) / 3.6e6);
    return std::string("dumped ") + hours + (off < 0 ? " before" : " after") + " most of the others";
  }
  return "";
}

}  // namespace

TraceSet load_traces(const std::vector<std::string>& inputs, const std::string& prefix, int world_size) {
  if (inputs.empty()) throw UsageError("no trace directory or dump files given");
  TraceSet set;
  set.dir = inputs.size() == 1 ? inputs.front() : inputs.front() + " (and " + std::to_string(inputs.size() - 1) + " more)";
  std::vector<std::pair<int, fs::path>> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<fs::path> found;
      for (const auto& item : fs::directory_iterator(input, ec)) {
        // A hidden file is never a dump: ddx writes each dump to ".<name>.tmp.XXXXXX" and renames
        // it (ddx/processes/atomic_file.h), so one is a write still under way, or one a killed
        // rank left; its name ends in the random suffix's last digit, not a rank.
        if (item.path().filename().string().rfind('.', 0) == 0) continue;
        if (item.is_regular_file(ec)) found.push_back(item.path());
      }
      std::sort(found.begin(), found.end());
      for (const fs::path& f : found) {
        // Files not named like a dump (a README, a report) are not dumps; nothing to say.
        if (auto rank = rank_in_name(f.filename().string(), prefix)) files.emplace_back(*rank, f);
      }
    } else if (fs::exists(input, ec)) {
      auto rank = rank_in_name(fs::path(input).filename().string(), prefix);
      if (!rank) {
        set.problems.push_back({-1, "unreadable", input + ": its name ends in no rank number; skipped"});
        continue;
      }
      files.emplace_back(*rank, fs::path(input));
    } else {
      throw UsageError(input + ": no such file or directory");
    }
  }
  if (files.empty()) {
    // The usual cause with a PyTorch job: its recorder was on, but nothing made it write.
    throw UsageError(set.dir + ": no flight recorder dumps in it (files named <prefix><rank>: ddx-fr-rank<R>.json, " +
                     "PyTorch's nccl_trace_rank_<R>" + (prefix.empty() ? std::string() : ", or " + prefix + "<R>") +
                     "); PyTorch writes them only when NCCL's watchdog fires or the job calls "
                     "torch._C._distributed_c10d._dump_fr_trace() (on Gloo, only the latter): "
                     "docs/analyze-pytorch.md section 1");
  }
  std::stable_sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<int, RankDump> parsed;
  std::map<int, std::string> file_of_rank;
  std::map<std::string, int> job_votes;
  int sizes_seen = 0;
  // Reading and decoding is most of the time on a thousand dumps: spread over the cores.
  std::vector<ReadResult> read = read_all(files);
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& [rank, path] = files[i];
    const std::string name = path.string();
    try {
      if (!read[i].error.empty()) throw std::runtime_error(read[i].error);
      RankDump d = std::move(read[i].dump);
      if (d.rank != rank) {
        set.problems.push_back({rank, "unreadable", name + ": holds rank " + std::to_string(d.rank) + "'s dump; skipped"});
        continue;
      }
      if (auto seen = file_of_rank.find(rank); seen != file_of_rank.end()) {
        // ddx writing both layouts (DDX_FR_FORMAT=both) leaves the same dump twice: its JSON,
        // which says more, is kept and the pickle is no second claim on the rank.
        RankDump& first = parsed[rank];
        if (is_ddx_twin(first, d) || is_ddx_twin(d, first)) {
          if (d.format == "ddx") {
            --job_votes[first.job_id];
            ++job_votes[d.job_id];
            file_of_rank[rank] = name;
            first = std::move(d);
          }
          continue;
        }
        set.problems.push_back({rank, "duplicate", name + ": a second dump of rank " + std::to_string(rank) + " (first: " +
                                                       seen->second + "); skipped"});
        continue;
      }
      if (d.truncated) {
        set.problems.push_back({rank, "truncated", name + ": cut off; recovered its header and " +
                                                       std::to_string(d.entries.size()) + " entries"});
      }
      sizes_seen = std::max(sizes_seen, d.world_size);
      ++job_votes[d.job_id];
      file_of_rank[rank] = name;
      parsed[rank] = std::move(d);
    } catch (const std::exception& e) {
      set.problems.push_back({rank, "unreadable", name + ": " + e.what() + "; skipped"});
    }
  }
  // Dumps from another run in the same directory: the job id most dumps carry wins.
  // A tie goes to the run that dumped last.
  int64_t best_time = -1;
  int best_votes = 0;
  for (const auto& [rank, d] : parsed) {
    const int votes = job_votes[d.job_id];
    if (votes > best_votes || (votes == best_votes && d.dump_unix_ms > best_time)) {
      set.job_id = d.job_id;
      best_votes = votes;
      best_time = d.dump_unix_ms;
    }
  }
  const PytorchRun pytorch_run = pytorch_run_of(parsed);
  for (auto& [rank, d] : parsed) {
    if (d.job_id != set.job_id) {
      set.problems.push_back({rank, "other-job", d.path + ": from job '" + d.job_id + "', not '" + set.job_id + "'; ignored"});
      continue;
    }
    if (std::string why = other_pytorch_run(pytorch_run, d); !why.empty()) {
      set.problems.push_back({rank, "other-job", d.path + ": from another run (" + why + "); ignored"});
      continue;
    }
    set.dumps[rank] = std::move(d);
  }
  set.world_size = world_size > 0 ? world_size : sizes_seen;
  if (set.world_size == 0) set.world_size = files.back().first + 1;
  finish_pytorch_dumps(set);
  for (int r = 0; r < set.world_size; ++r) {
    if (set.dumps.count(r)) continue;
    set.missing.push_back(r);
    const bool reported = std::any_of(set.problems.begin(), set.problems.end(),
                                      [&](const DumpProblem& p) { return p.rank == r; });
    if (!reported) set.problems.push_back({r, "missing", "no dump of rank " + std::to_string(r)});
  }
  std::stable_sort(set.problems.begin(), set.problems.end(),
                   [](const DumpProblem& a, const DumpProblem& b) { return a.rank < b.rank; });
  return set;
}

TraceSet load_trace_dir(const std::string& dir, int world_size) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError(dir + ": not a directory");
  return load_traces({dir}, "", world_size);
}

}  // namespace ddx::analyze
