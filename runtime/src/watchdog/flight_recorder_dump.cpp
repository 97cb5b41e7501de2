// The flight recorder's dump: one JSON document per rank, written atomically so a reader never
// sees half a file (PyTorch's dumps are known to come out truncated, PR #145125).
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ddx/processes/atomic_file.h"
#include "ddx/watchdog/flight_recorder.h"

namespace ddx {
namespace {

using json = nlohmann::ordered_json;

json entry_json(const OpRecord& r) {
  return json{{"id", r.id},
              {"group", r.group},
              {"group_ranks", r.group_ranks},
              {"seq", r.seq},
              {"p2p", r.p2p},
              {"op", to_string(r.op)},
              {"reduce_op", r.reduce_op},
              {"dtype", r.dtype},
              {"in_shape", r.in_shape},
              {"out_shape", r.out_shape},
              {"numel", r.numel},
              {"bytes", r.bytes},
              {"peer", r.peer},
              {"backend", r.backend},
              {"call_site", r.call_site},
              {"state", to_string(r.state)},
              {"error", r.error},
              {"enqueue_us", r.t_enqueue_us},
              {"start_us", r.t_start_us},
              {"end_us", r.t_end_us}};
}

}  // namespace

int64_t unix_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string flight_recorder_json(const RecorderSnapshot& s, const DumpContext& c) {
  const int64_t now_unix_ms = unix_now_ms();
  const int64_t now_steady_us = steady_now_us();
  json doc;
  doc["format"] = "ddx-flight-recorder";
  doc["version"] = kFlightRecorderFormatVersion;
  doc["rank"] = c.rank;
  doc["local_rank"] = c.local_rank;
  doc["world_size"] = c.world_size;
  doc["host"] = c.host;
  doc["pid"] = c.pid;
  doc["job_id"] = c.job_id;
  doc["reason"] = c.reason;
  json triggers = json::array();
  for (const auto& t : c.triggers) triggers.push_back({{"reason", t.reason}, {"unix_ms", t.unix_ms}});
  doc["triggers"] = std::move(triggers);
  doc["dump_unix_ms"] = now_unix_ms;
  doc["dump_steady_us"] = now_steady_us;
  doc["heartbeat_unix_ms"] = c.heartbeat_unix_ms;
  doc["last_event_unix_ms"] =
      s.last_event_us ? now_unix_ms - (now_steady_us - s.last_event_us) / 1000 : 0;
  doc["collective_timeout_ms"] = c.collective_timeout_ms;
  doc["capacity"] = s.capacity;
  doc["recorded_total"] = s.recorded_total;
  json groups = json::object();
  for (const GroupProgress& g : s.groups) {
    groups[g.group] = {{"ranks", g.ranks},
                       {"last_enqueued", g.last_enqueued},
                       {"last_started", g.last_started},
                       {"last_completed", g.last_completed},
                       {"last_enqueued_p2p", g.last_enqueued_p2p},
                       {"last_completed_p2p", g.last_completed_p2p},
                       {"in_flight", g.in_flight}};
  }
  doc["groups"] = std::move(groups);
  doc["peers"] = c.peers_json.empty() ? json::object() : json::parse(c.peers_json, nullptr, false);
  if (doc["peers"].is_discarded()) doc["peers"] = json::object();
  // Entries go last, one per line: big dumps stay greppable, and a reader can salvage the
  // header and every complete entry of a file truncated by a full disk or a careless copy.
  std::string text = doc.dump();
  text.pop_back();  // the closing brace
  text += ",\n\"entries\":[";
  for (size_t i = 0; i < s.entries.size(); ++i) {
    text += i ? ",\n" : "\n";
    text += entry_json(s.entries[i]).dump();
  }
  text += "\n]}\n";
  return text;
}

std::string flight_recorder_path(const std::string& dir, int rank) {
  return dir + "/ddx-fr-rank" + std::to_string(rank) + ".json";
}

std::string flight_recorder_path(const std::string& dir, int rank, DumpFormat format) {
  return format == DumpFormat::Ddx ? flight_recorder_path(dir, rank) : flight_recorder_pytorch_path(dir, rank);
}

std::string write_flight_recorder_dump(const std::string& dir, const RecorderSnapshot& snapshot,
                                       const DumpContext& context, DumpFormat format) {
  std::filesystem::create_directories(dir);  // created by the first dump, not by every run
  std::string path;
  if (format != DumpFormat::PyTorch) {
    path = flight_recorder_path(dir, context.rank);
    write_file_atomically(path, flight_recorder_json(snapshot, context));
  }
  if (format != DumpFormat::Ddx) {
    path = flight_recorder_pytorch_path(dir, context.rank);
    write_file_atomically(path, flight_recorder_pytorch_pickle(snapshot, context));
  }
  return path;
}

}  // namespace ddx
