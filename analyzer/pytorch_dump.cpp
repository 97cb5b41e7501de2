// PyTorch flight-recorder dumps into the analyzer's model. What each field becomes:
//   process_group[0] (pg_name)        -> Entry::group; pg_config[pg_name].ranks -> its members
//   collective_seq_id / p2p_seq_id    -> Entry::seq (older dumps: seq_id)
//   profiling_name "nccl:send 1->2"   -> backend, op, peer (group ranks, as PyTorch writes them)
//   input_sizes/dtypes                -> shape, dtype ("Float" -> "float32", as ddx writes it)
//   frames (innermost first)          -> Entry::stack, and the first frame outside torch as the
//                                        call site
//   state + retired                   -> completed / in flight / failed (timed out), below
//   pg_status                         -> each group's last enqueued/started/completed number
#include "analyzer/pytorch_dump.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <stdexcept>

#include "analyzer/analysis_util.h"
#include "analyzer/dump_value.h"

namespace ddx::analyze {
namespace {

int64_t int_of(const DumpValue& v, int64_t fallback) {
  switch (v.kind()) {
    case DumpValue::Kind::Int: return v.as_int();
    case DumpValue::Kind::Double: return static_cast<int64_t>(v.as_double());
    case DumpValue::Kind::Bool: return v.as_bool() ? 1 : 0;
    case DumpValue::Kind::String:
      try {
        return std::stoll(v.as_string());
      } catch (const std::exception&) {
        return fallback;
      }
    default: return fallback;
  }
}

int64_t int_of(const DumpValue& doc, const char* key, int64_t fallback) { return int_of(doc.get(key), fallback); }

std::string string_of(const DumpValue& doc, const char* key) { return text_of(doc.get(key)); }

// pg_config's ranks are written as text ("[0, 1, 2]"); older dumps and our own fixtures may
// hold a list.
std::vector<int> ranks_of(const DumpValue& v) {
  std::vector<int> out;
  if (v.is_list()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].is_int()) out.push_back(static_cast<int>(v[i].as_int()));
    }
    return out;
  }
  const std::string s = text_of(v);
  for (size_t i = 0; i < s.size();) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end;
    out.push_back(std::stoi(s.substr(i, std::min<size_t>(end - i, 9))));
    i = end;
  }
  return out;
}

// c10::ScalarType names as PyTorch's recorder writes them, in ddx's spelling.
std::string dtype_name(const std::string& s) {
  static const std::map<std::string, std::string> names = {
      {"Float", "float32"},   {"Double", "float64"}, {"Half", "float16"},     {"BFloat16", "bfloat16"},
      {"Long", "int64"},      {"Int", "int32"},      {"Short", "int16"},      {"Char", "int8"},
      {"Byte", "uint8"},      {"Bool", "bool"},      {"ComplexFloat", "complex64"},
      {"ComplexDouble", "complex128"}, {"Float8_e4m3fn", "float8_e4m3fn"}, {"Float8_e5m2", "float8_e5m2"}};
  auto it = names.find(s);
  return it == names.end() ? s : it->second;
}

struct ProfilingName {
  std::string backend, op;
  int peer = -1;  // group rank of the other side of a send/recv
  int self = -1;  // this rank's group rank, as the send/recv names it
  bool p2p = false;
};

// "nccl:all_reduce", "gloo:broadcast", "nccl:coalesced", "nccl:send 1->2", "nccl:recv 3<-0".
ProfilingName parse_profiling_name(const std::string& name) {
  ProfilingName p;
  const size_t colon = name.find(':');
  p.backend = colon == std::string::npos ? "" : name.substr(0, colon);
  std::string rest = colon == std::string::npos ? name : name.substr(colon + 1);
  const size_t space = rest.find(' ');
  p.op = rest.substr(0, space);
  if ((p.op == "send" || p.op == "recv") && space != std::string::npos) {
    p.p2p = true;
    const std::string ends = rest.substr(space + 1);
    const size_t arrow = ends.find(p.op == "send" ? "->" : "<-");
    if (arrow != std::string::npos) {
      try {
        p.self = std::stoi(ends.substr(0, arrow));
        p.peer = std::stoi(ends.substr(arrow + 2));
      } catch (const std::exception&) {
        p.self = p.peer = -1;
      }
    }
  }
  return p;
}

std::vector<int64_t> first_shape(const DumpValue& sizes) {
  std::vector<int64_t> out;
  const DumpValue shape = sizes[0];
  out.reserve(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].is_int()) out.push_back(shape[i].as_int());
  }
  return out;
}

int64_t total_numel(const DumpValue& sizes) {
  int64_t total = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const DumpValue shape = sizes[s];
    if (!shape.is_list()) continue;
    int64_t n = 1;
    for (size_t i = 0; i < shape.size(); ++i) n *= shape[i].is_int() ? shape[i].as_int() : 0;
    total += n;
  }
  return total;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A stack as the analysis holds it: "file:line in function" per frame, and the call site.
struct ReadStack {
  Shared<std::vector<std::string>> frames;
  std::string call_site;
};

// A dump's entries mostly repeat a few stacks: each distinct one is read and stored once.
// PyTorch pickles each distinct frame once and every entry's stack refers to it, so a stack is
// known by its frames' identities without reading them; where the format cannot tell (JSON),
// by its text.
struct StackPool {
  std::map<std::vector<const void*>, ReadStack> by_identity;
  std::map<std::vector<std::string>, Shared<std::vector<std::string>>> by_text;
};

ReadStack read_stack(const DumpValue& frames, StackPool& pool) {
  ReadStack out;
  std::vector<std::string> stack;
  stack.reserve(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    const DumpValue f = frames[i];
    const std::string file = string_of(f, "filename");
    const std::string line = string_of(f, "line");
    const std::string function = string_of(f, "name");
    stack.push_back(file + ":" + line + " in " + function);
    // torch's own frames come before the user's call: the call site is the first frame outside.
    if (out.call_site.empty() && !file.empty() && !detail::inside_torch(file)) {
      out.call_site = base_name(file) + ":" + line + " " + function;
    }
  }
  auto it = pool.by_text.find(stack);
  if (it == pool.by_text.end()) it = pool.by_text.emplace(stack, Shared<std::vector<std::string>>(stack)).first;
  out.frames = it->second;
  return out;
}

void read_frames(const DumpValue& frames, Entry& x, StackPool& pool) {
  if (!frames.is_list()) return;
  std::vector<const void*> ids(frames.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = frames[i].identity();
  const bool known = std::find(ids.begin(), ids.end(), nullptr) == ids.end();
  const ReadStack* stack = nullptr;
  ReadStack read;
  if (known) {
    auto it = pool.by_identity.find(ids);
    if (it == pool.by_identity.end()) it = pool.by_identity.emplace(ids, read_stack(frames, pool)).first;
    stack = &it->second;
  } else {
    read = read_stack(frames, pool);
    stack = &read;
  }
  x.stack = stack->frames;
  x.call_site = stack->call_site;
}

// "0 (default_pg)", "1 (stuck_subgroup)": PyTorch's group name with the description users give
// new_group(group_desc=...), left out where PyTorch wrote none ("undefined").
std::string group_label(const std::string& name, const std::string& desc) {
  return desc.empty() || desc == "undefined" ? name : name + " (" + desc + ")";
}

// PyTorch names the world group "0"; ddx's own pickles name it "world". Both describe it
// "default_pg".
bool is_default_group(const std::string& label) {
  return label == "0" || label.rfind("0 (", 0) == 0 || label.find("(default_pg)") != std::string::npos;
}

// One entry, and what the dump says about it that the analysis's Entry has no place for.
struct ReadEntry {
  Entry entry;
  std::string pg_id;      // "" where the dump has none
  std::string desc;       // the group's description from process_group
  bool has_desc = false;  // process_group gave one (PyTorch's newer dumps)
  bool retired = false;
  int64_t timeout_ms = 0;
  int64_t op_id = -1;
  int self = -1;          // this rank's group rank, as a send/recv's profiling name gives it
};

// The entry keys read, in the order of EntryField (older dumps: seq_id for both numbers).
enum EntryField {
  kRecordId, kProfilingName, kIsP2p, kPgId, kProcessGroup, kCollectiveSeqId, kP2pSeqId, kSeqId, kInputSizes,
  kOutputSizes, kInputDtypes, kOutputDtypes, kTimeCreated, kTimeStarted, kTimeCompleted, kState, kRetired, kOpId,
  kTimeoutMs, kFrames
};

DictFields entry_fields() {
  return DictFields({"record_id", "profiling_name", "is_p2p", "pg_id", "process_group", "collective_seq_id",
                     "p2p_seq_id", "seq_id", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes",
                     "time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns", "state",
                     "retired", "op_id", "timeout_ms", "frames"});
}

ReadEntry entry_from(const std::vector<DumpValue>& e, StackPool& stacks) {
  ReadEntry r;
  Entry& x = r.entry;
  x.id = static_cast<uint64_t>(std::max<int64_t>(0, int_of(e[kRecordId], 0)));
  const ProfilingName name = parse_profiling_name(text_of(e[kProfilingName]));
  x.backend = name.backend;
  x.op = name.op;
  x.peer = name.peer;
  r.self = name.self;
  x.p2p = e[kIsP2p].is_null() ? name.p2p : int_of(e[kIsP2p], 0) != 0;
  r.pg_id = text_of(e[kPgId]);
  const DumpValue& process_group = e[kProcessGroup];
  x.group = process_group.size() > 0 ? text_of(process_group[0]) : r.pg_id;
  r.has_desc = process_group.size() > 1;
  if (r.has_desc) r.desc = text_of(process_group[1]);
  const int64_t seq = int_of(x.p2p ? e[kP2pSeqId] : e[kCollectiveSeqId], int_of(e[kSeqId], 0));
  x.seq = static_cast<uint64_t>(std::max<int64_t>(0, seq));
  x.in_shape = first_shape(e[kInputSizes]);
  x.out_shape = first_shape(e[kOutputSizes]);
  x.numel = total_numel(e[kInputSizes]);
  for (const EntryField key : {kInputDtypes, kOutputDtypes}) {
    if (x.dtype.empty() && e[key].size() > 0) x.dtype = dtype_name(text_of(e[key][0]));
  }
  x.enqueue_us = int_of(e[kTimeCreated], 0) / 1000;
  x.start_us = int_of(e[kTimeStarted], 0) / 1000;
  x.end_us = int_of(e[kTimeCompleted], 0) / 1000;
  x.state = text_of(e[kState]);
  r.retired = int_of(e[kRetired], 0) != 0;
  r.op_id = int_of(e[kOpId], -1);
  r.timeout_ms = int_of(e[kTimeoutMs], 0);
  read_frames(e[kFrames], x, stacks);
  return r;
}

// What PyTorch's states mean for the analysis. NCCL marks an entry completed when its end event
// fires, and retires it from the watchdog's list on completion or on timeout: retired and not
// completed is a timed-out collective. Gloo never updates the state (every entry stays
// "scheduled") and retires a work on success and on failure alike, so its entries are settled
// across ranks once every dump is read (settle_gloo_states).
void settle_state(Entry& x, bool retired, int64_t timeout_ms) {
  if (x.state == "completed") return;
  if (x.state != "scheduled" && x.state != "started") x.state = "scheduled";
  if (!retired || x.backend == "gloo") return;
  x.state = "failed";
  x.error = "timed out after " + std::to_string(timeout_ms) + " ms";
  x.end_us = x.enqueue_us + timeout_ms * 1000;
}

// Gloo: a collective some member got past completed for everyone; the newest one completed too
// when every member left a dump that holds it with the same call. Otherwise the ranks holding
// the newest one were still in it: it never completed for the group.
std::set<int> settle_gloo_states(TraceSet& traces) {
  std::map<std::string, uint64_t> front;
  for (const auto& [rank, d] : traces.dumps) {
    if (d.written_by_ddx) continue;
    for (const Entry& x : d.entries) {
      if (x.backend == "gloo" && !x.p2p) front[x.group] = std::max(front[x.group], x.seq);
    }
  }
  auto call = [](const Entry& x) { return x.op + "|" + x.dtype + "|" + std::to_string(x.numel); };
  std::map<std::string, bool> front_done;
  for (const auto& [group, seq] : front) {
    std::string first;
    bool done = true;
    std::vector<int> members;
    for (const auto& [rank, d] : traces.dumps) {
      for (const Entry& x : d.entries) {
        if (x.group == group && !x.p2p && !x.group_ranks.empty()) members = x.group_ranks;
      }
    }
    for (int m : members) {
      auto it = traces.dumps.find(m);
      const Entry* at = nullptr;
      if (it != traces.dumps.end()) {
        for (const Entry& x : it->second.entries) {
          if (x.group == group && !x.p2p && x.seq == seq) at = &x;
        }
      }
      if (!at) {
        done = false;
        break;
      }
      if (first.empty()) first = call(*at);
      done = done && call(*at) == first;
    }
    front_done[group] = done && !members.empty();
  }
  std::set<int> changed;
  for (auto& [rank, d] : traces.dumps) {
    if (d.written_by_ddx) continue;  // ddx records Gloo's completions itself
    for (Entry& x : d.entries) {
      if (x.backend != "gloo" || x.p2p || x.state != "scheduled") continue;
      if (x.seq < front[x.group] || front_done[x.group]) {
        x.state = "completed";
        changed.insert(rank);
      }
    }
  }
  return changed;
}

// Each group's position from its entries (pg_status kept only for groups no entry is left of).
void positions_from_entries(RankDump& d) {
  std::map<std::string, GroupPosition> fresh;
  for (const Entry& x : d.entries) {
    GroupPosition& p = fresh[x.group];
    if (p.ranks.empty()) p.ranks = x.group_ranks;
    if (x.p2p) continue;
    p.last_enqueued = std::max(p.last_enqueued, x.seq);
    if (x.state == "started" || x.completed()) p.last_started = std::max(p.last_started, x.seq);
    if (x.completed()) p.last_completed = std::max(p.last_completed, x.seq);
    if (x.in_flight()) ++p.in_flight;
  }
  for (auto& [name, p] : fresh) {
    if (p.ranks.empty() && d.groups.count(name)) p.ranks = d.groups[name].ranks;
    d.groups[name] = p;
  }
}

}  // namespace

bool is_pytorch_dump(const DumpValue& doc) {
  return doc.get("version").is_string() && doc.get("entries").is_list() && !doc.has("format");
}

RankDump read_pytorch_dump(const DumpValue& doc, int rank, const std::string& path, int64_t file_time_us) {
  if (!is_pytorch_dump(doc)) throw std::runtime_error("not a PyTorch flight recorder dump (no \"version\" and \"entries\")");
  const std::string version = doc.get("version").as_string();
  if (version.rfind("2.", 0) != 0) {
    throw std::runtime_error("PyTorch flight recorder format " + version + " (this ddx reads 2.x)");
  }
  RankDump d;
  d.path = path;
  d.rank = rank;
  d.format = "pytorch " + version;
  d.dump_steady_us = file_time_us;  // entries carry unix times, as does this
  d.dump_unix_ms = file_time_us / 1000;

  // Groups: their members from pg_config (NCCL; Gloo leaves them empty), their positions from
  // pg_status, which is keyed by pg_id where entries say process_group.
  std::map<std::string, Shared<std::vector<int>>> members;  // by group label
  std::map<std::string, std::string> desc_of;        // by PyTorch's group name
  doc.get("pg_config").for_each_item([&](const DumpValue& key_value, const DumpValue& g) {
    const std::string key = text_of(key_value);
    if (key.empty() || !g.is_dict()) return;
    const std::string name = string_of(g, "name").empty() ? key : string_of(g, "name");
    desc_of[name] = string_of(g, "desc");
    const std::string label = group_label(name, desc_of[name]);
    if (g.has("ranks")) members[label] = ranks_of(g.get("ranks"));
    if (is_default_group(label)) d.world_size = static_cast<int>(members[label].size());
  });

  const DumpValue entries = doc.get("entries");
  std::map<std::string, std::string> name_of_pg_id;
  std::vector<ReadEntry> read;
  StackPool stacks;
  DictFields fields = entry_fields();
  read.reserve(entries.size());
  // Labels and member lists are looked up once per group, not per entry.
  std::map<std::pair<std::string, std::string>, std::pair<std::string, Shared<std::vector<int>>>> labels;
  for (size_t i = 0; i < entries.size(); ++i) {
    const DumpValue e = entries[i];
    if (!e.is_dict()) throw std::runtime_error("an entry that is not a dict");
    ReadEntry r = entry_from(fields.read(e), stacks);
    Entry& x = r.entry;
    const std::string& desc = r.has_desc || !desc_of.count(x.group) ? r.desc : desc_of[x.group];
    auto known = labels.find({x.group, desc});
    if (known == labels.end()) {
      const std::string label = group_label(x.group, desc);
      auto m = members.find(label);
      known = labels.emplace(std::make_pair(x.group, desc),
                             std::make_pair(label, m != members.end() ? m->second : Shared<std::vector<int>>())).first;
    }
    x.group = known->second.first;
    x.group_ranks = known->second.second;
    if (!r.pg_id.empty()) name_of_pg_id[r.pg_id] = x.group;
    d.collective_timeout_ms = std::max(d.collective_timeout_ms, r.timeout_ms);
    read.push_back(std::move(r));
  }
  for (ReadEntry& r : read) settle_state(r.entry, r.retired, d.collective_timeout_ms);
  // Inside a coalesced batch (batch_isend_irecv, _coalescing_manager) only the batch's trailing
  // "coalesced" entry is ever completed and retired; the ops before it, up to its op_id, stay
  // "scheduled" although they ran with it.
  int64_t done_through = -1;
  for (size_t i = read.size(); i-- > 0;) {
    Entry& x = read[i].entry;
    if (x.op == "coalesced" && x.completed()) done_through = std::max(done_through, read[i].op_id);
    if (!x.completed() && x.op != "coalesced" && read[i].op_id >= 0 && read[i].op_id <= done_through) x.state = "completed";
  }
  // The rank in the file name against the dump's own word: a send/recv names this rank's place
  // in its group.
  for (const ReadEntry& r : read) {
    const Entry& x = r.entry;
    if (r.self >= 0 && r.self < static_cast<int>(x.group_ranks.size()) && x.group_ranks[r.self] != rank) {
      throw std::runtime_error("its file name says rank " + std::to_string(rank) + ", its " + x.op + " #" +
                               std::to_string(x.seq) + " on group " + x.group + " was issued by rank " +
                               std::to_string(x.group_ranks[r.self]));
    }
  }
  d.entries.reserve(read.size());
  for (ReadEntry& r : read) d.entries.push_back(std::move(r.entry));
  read = {};
  // When the dump was taken: PyTorch does not say. The file's time is right where the dump was
  // written, not where it was copied or checked out later; a file time past the newest event
  // by more than three timeouts is a copy's, and the newest event plus one timeout (the earliest
  // the timeout dump can have been written) stands in.
  int64_t newest = 0;
  for (const Entry& x : d.entries) newest = std::max({newest, x.enqueue_us, x.start_us, x.end_us});
  const int64_t timeout_us = d.collective_timeout_ms * 1000;
  if (newest > 0 && timeout_us > 0 && (file_time_us <= 0 || file_time_us > newest + 3 * timeout_us)) {
    d.dump_steady_us = newest + timeout_us;
    d.dump_unix_ms = d.dump_steady_us / 1000;
  }
  if (!d.entries.empty()) {
    d.recorded_total = d.entries.back().id + 1;
    d.wrapped = d.entries.front().id > 0;
    if (d.wrapped) d.capacity = d.entries.size();
  }

  doc.get("pg_status").for_each_item([&](const DumpValue& key, const DumpValue& s) {
    const std::string pg_id = text_of(key);
    auto named = name_of_pg_id.find(pg_id);
    const std::string name = named != name_of_pg_id.end() ? named->second
                             : desc_of.count(pg_id)     ? group_label(pg_id, desc_of[pg_id])
                                                        : pg_id;
    // After a point-to-point op, pg_status holds the p2p counter where it said the collective
    // one (torch 2.11): its numbers stand in only for a group no entry is left of.
    GroupPosition p;
    p.last_enqueued = static_cast<uint64_t>(std::max<int64_t>(0, int_of(s, "last_enqueued_collective", 0)));
    p.last_started = static_cast<uint64_t>(std::max<int64_t>(0, int_of(s, "last_started_collective", 0)));
    p.last_completed = static_cast<uint64_t>(std::max<int64_t>(0, int_of(s, "last_completed_collective", 0)));
    if (name_of_pg_id.count(pg_id)) p = GroupPosition{};
    auto m = members.find(name);
    if (m != members.end()) p.ranks = m->second;
    d.groups[name] = p;
  });
  positions_from_entries(d);
  const std::string backend = d.entries.empty() ? "" : d.entries.front().backend;
  d.reason = "PyTorch flight recorder" + (backend.empty() ? std::string() : " (" + backend + ")") + ", format " + version;
  // ddx's own recorder in PyTorch's layout (DDX_FR_FORMAT=pytorch) adds what PyTorch's has no
  // place for: who wrote it, and why.
  if (const DumpValue x = doc.get("ddx"); x.is_dict()) {
    d.format += ", written by ddx";
    d.written_by_ddx = true;
    d.rank = static_cast<int>(int_of(x, "rank", rank));
    d.local_rank = static_cast<int>(int_of(x, "local_rank", 0));
    d.world_size = static_cast<int>(int_of(x, "world_size", d.world_size));
    d.host = string_of(x, "host");
    d.pid = static_cast<int>(int_of(x, "pid", 0));
    d.job_id = string_of(x, "job_id");
    if (!string_of(x, "reason").empty()) d.reason = string_of(x, "reason");
    d.dump_unix_ms = int_of(x, "dump_unix_ms", d.dump_unix_ms);
    d.dump_steady_us = d.dump_unix_ms * 1000;
    d.collective_timeout_ms = int_of(x, "collective_timeout_ms", d.collective_timeout_ms);
    d.capacity = static_cast<uint64_t>(int_of(x, "capacity", static_cast<int64_t>(d.capacity)));
    d.recorded_total = static_cast<uint64_t>(int_of(x, "recorded_total", static_cast<int64_t>(d.recorded_total)));
    d.wrapped = d.recorded_total > d.capacity && d.capacity > 0;
    // Its backend is the job's, not the "nccl:" prefix torchfrtrace insists on.
    const std::string lib = string_of(doc, "comm_lib_version");
    // Its ops by ddx's names, as its JSON dumps call them (flight_recorder_pytorch.cpp renames).
    static const std::map<std::string, std::string> ddx_names = {
        {"_all_gather_base", "all_gather"}, {"_reduce_scatter_base", "reduce_scatter"}, {"all_reduce_barrier", "barrier"}};
    for (Entry& e : d.entries) {
      // Its call-site label went in as a one-frame stack {filename "ddx", line 0, name label}.
      if (e.stack.size() == 1 && e.stack[0].rfind("ddx:0 in ", 0) == 0) {
        e.call_site = e.stack[0].substr(9);
        e.stack = {};
      }
      if (lib.rfind("ddx ", 0) == 0) e.backend = lib.substr(4);
      if (auto it = ddx_names.find(e.op); it != ddx_names.end()) e.op = it->second;
    }
  }
  return d;
}

void finish_pytorch_dumps(TraceSet& traces) {
  // Every group some dump knows, and which ranks know it.
  std::map<std::string, std::vector<int>> known;  // ranks, then as shared below
  for (const auto& [rank, d] : traces.dumps) {
    if (d.format == "ddx") continue;
    for (const auto& [name, g] : d.groups) {
      if (g.ranks.empty()) known[name].push_back(rank);
    }
  }
  for (auto& [name, ranks] : known) {
    std::sort(ranks.begin(), ranks.end());
    // The default group is everyone, including the ranks that left no dump.
    if (is_default_group(name)) {
      ranks.clear();
      for (int r = 0; r < traces.world_size; ++r) ranks.push_back(r);
    }
  }
  std::map<std::string, Shared<std::vector<int>>> shared_known(known.begin(), known.end());
  // Only the dumps this changes have their positions counted again (NCCL's name their members).
  std::set<int> changed;
  for (auto& [rank, d] : traces.dumps) {
    if (d.format == "ddx") continue;
    for (auto& [name, g] : d.groups) {
      auto k = known.find(name);
      if (g.ranks.empty() && k != known.end()) g.ranks = k->second;
    }
    for (Entry& x : d.entries) {
      if (!x.group_ranks.empty()) continue;
      auto k = shared_known.find(x.group);
      if (k == shared_known.end()) continue;
      x.group_ranks = k->second;
      changed.insert(rank);
    }
  }
  for (int rank : settle_gloo_states(traces)) changed.insert(rank);
  for (int rank : changed) positions_from_entries(traces.dumps.at(rank));
}

}  // namespace ddx::analyze
