// The flight recorder's dump in PyTorch's own layout (its FlightRecorder, format "2.10"), pickled
// as PyTorch pickles it, so torchfrtrace and a team's other PyTorch tooling read ddx's dumps.
// What each ddx field becomes:
//   group "world" / "tp/1"     -> process_group ("world", "default_pg") / ("tp/1", "tp/1"), and
//                                 pg_config[name] = {name, desc, ranks "[0, 1]"}
//   seq (collective or p2p)    -> collective_seq_id or p2p_seq_id
//   op + peer                  -> profiling_name "nccl:all_reduce", "nccl:send 0->1" (group ranks):
//                                 torchfrtrace accepts no other prefix, so "nccl:" is written
//                                 whatever the backend; the real one is comm_lib_version's
//   steady-clock times         -> time_created_ns / time_discovered_*_ns, unix nanoseconds
//   failed                     -> retired and not completed, as PyTorch leaves a timed-out op
//   call_site                  -> one frame {name: call site, filename: "ddx", line: 0}
// ddx's own facts PyTorch's layout has no place for (rank, host, pid, job) go in a top-level
// "ddx" dict that PyTorch's readers ignore and `ddx analyze` uses.
#include <map>
#include <nlohmann/json.hpp>

#include "ddx/watchdog/flight_recorder.h"
#include "pickle_writer.h"

namespace ddx {
namespace {

using json = nlohmann::ordered_json;

// PyTorch's names for what ddx calls an op (ddx's all_gather and reduce_scatter are the flat
// tensor forms); a barrier is an all_reduce of one element there.
std::string pytorch_op(OpType op) {
  switch (op) {
    case OpType::AllGather: return "_all_gather_base";
    case OpType::ReduceScatter: return "_reduce_scatter_base";
    case OpType::Barrier:
    case OpType::MonitoredBarrier: return "all_reduce_barrier";
    default: return to_string(op);
  }
}

// ddx's dtype names in c10::ScalarType's spelling, as PyTorch's recorder writes them.
std::string pytorch_dtype(const std::string& dtype) {
  static const std::map<std::string, std::string> names = {
      {"float32", "Float"}, {"float64", "Double"}, {"float16", "Half"}, {"bfloat16", "BFloat16"},
      {"int64", "Long"},    {"int32", "Int"},      {"int16", "Short"},  {"int8", "Char"},
      {"uint8", "Byte"},    {"bool", "Bool"}};
  auto it = names.find(dtype);
  return it == names.end() ? dtype : it->second;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string desc_of(const std::string& group) { return group == "world" ? "default_pg" : group; }

// This rank's place in the group, as PyTorch's send/recv names count.
int group_rank(const OpRecord& r, int rank) {
  for (size_t i = 0; i < r.group_ranks.size(); ++i) {
    if (r.group_ranks[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::string flight_recorder_pytorch_pickle(const RecorderSnapshot& s, const DumpContext& c) {
  const int64_t now_unix_ms = unix_now_ms();
  const int64_t now_steady_us = steady_now_us();
  auto unix_ns = [&](int64_t steady_us) -> json {
    if (steady_us <= 0) return nullptr;
    return (now_unix_ms * 1000 - (now_steady_us - steady_us)) * 1000;
  };

  json doc;
  doc["version"] = "2.10";
  std::string backend;
  for (const OpRecord& r : s.entries) backend = r.backend.empty() ? backend : r.backend;
  doc["comm_lib_version"] = backend.empty() ? "ddx" : "ddx " + backend;
  json config = json::object(), status = json::object();
  std::map<std::string, int> pg_id;
  for (const GroupProgress& g : s.groups) {
    pg_id[g.group] = static_cast<int>(pg_id.size());
    config[g.group] = {{"name", g.group}, {"desc", desc_of(g.group)}, {"ranks", ranks_text(g.ranks)}};
    status[g.group] = {{"last_enqueued_collective", g.last_enqueued},
                       {"last_started_collective", g.last_started},
                       {"last_completed_collective", g.last_completed}};
  }
  doc["pg_config"] = std::move(config);
  doc["pg_status"] = std::move(status);

  json entries = json::array();
  for (const OpRecord& r : s.entries) {
    std::string name = "nccl:" + pytorch_op(r.op);
    const int self = group_rank(r, c.rank);
    if (r.op == OpType::Send) name += " " + std::to_string(self) + "->" + std::to_string(r.peer);
    if (r.op == OpType::Recv) name += " " + std::to_string(self) + "<-" + std::to_string(r.peer);
    const bool completed = r.state == OpState::Completed;
    const bool failed = r.state == OpState::Failed;
    json e;
    e["record_id"] = r.id;
    e["pg_id"] = pg_id.count(r.group) ? pg_id[r.group] : -1;
    e["process_group"] = json::array({r.group, desc_of(r.group)});
    e["collective_seq_id"] = r.p2p ? 0 : r.seq;
    e["p2p_seq_id"] = r.p2p ? r.seq : 0;
    e["op_id"] = r.id;
    e["profiling_name"] = name;
    e["time_created_ns"] = unix_ns(r.t_enqueue_us);
    e["input_sizes"] = json::array({r.in_shape});
    e["input_dtypes"] = json::array({pytorch_dtype(r.dtype)});
    e["output_sizes"] = json::array({r.out_shape});
    e["output_dtypes"] = json::array({pytorch_dtype(r.dtype)});
    e["state"] = completed ? "completed" : r.t_start_us > 0 ? "started" : "scheduled";
    e["time_discovered_started_ns"] = unix_ns(r.t_start_us);
    e["time_discovered_completed_ns"] = completed ? unix_ns(r.t_end_us) : json(nullptr);
    e["retired"] = completed || failed;
    e["timeout_ms"] = c.collective_timeout_ms;
    e["is_p2p"] = r.p2p;
    if (completed && r.t_start_us > 0 && r.t_end_us >= r.t_start_us) {
      e["duration_ms"] = (r.t_end_us - r.t_start_us) / 1000.0;
    }
    e["frames"] = r.call_site.empty() ? json::array()
                                      : json::array({json{{"name", r.call_site}, {"filename", "ddx"}, {"line", 0}}});
    entries.push_back(std::move(e));
  }
  doc["entries"] = std::move(entries);
  doc["ddx"] = {{"rank", c.rank},       {"local_rank", c.local_rank}, {"world_size", c.world_size},
                {"host", c.host},       {"pid", c.pid},               {"job_id", c.job_id},
                {"reason", c.reason},   {"dump_unix_ms", now_unix_ms},
                {"collective_timeout_ms", c.collective_timeout_ms},
                {"capacity", s.capacity}, {"recorded_total", s.recorded_total}};
  return to_pickle(doc);
}

std::string flight_recorder_pytorch_path(const std::string& dir, int rank) {
  return dir + "/nccl_trace_rank_" + std::to_string(rank);
}

}  // namespace ddx
