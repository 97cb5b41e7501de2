#include "doctor/doctor_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "buserror/shm_model.h"

namespace ddx::doctor {
namespace {

using nlohmann::json;
using Ranks = std::vector<json>;

std::string who(const json& r) { return "rank " + std::to_string(r["rank"].get<int>()) + " (" + r["host"].get<std::string>() + ")"; }

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1ULL << 30));
  return text;
}

std::string env_of(const json& r, const std::string& key) {
  return r["env"].contains(key) ? r["env"][key].get<std::string>() : "";
}

// One rank per host (the first seen): host-wide facts need judging once.
Ranks one_per_host(const Ranks& ranks) {
  std::set<std::string> seen;
  Ranks out;
  for (const auto& r : ranks) {
    if (seen.insert(r["host"].get<std::string>()).second) out.push_back(r);
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

CheckRow check_shm(const Ranks& ranks) {
  CheckRow row{"/dev/shm vs local ranks"};
  std::vector<std::string> values;
  for (const auto& r : one_per_host(ranks)) {
    const int local = r["local_world_size"].get<int>();
    EnvMap env;
    for (const auto& [k, v] : r["env"].items()) env[k] = v.get<std::string>();
    if (env_of(r, "NCCL_SHM_DISABLE") == "1") {
      values.push_back(r["host"].get<std::string>() + ": NCCL_SHM_DISABLE=1, no SHM segments");
      continue;
    }
    uint64_t segment = shm::kHeaderBytes + shm::kLlBytes + shm::kLl128Bytes + shm::kSimpleBytes;
    try {
      segment = shm::segment_bytes(env);
    } catch (const std::exception&) {
      // A malformed NCCL_BUFFSIZE is the environment check's to report; size with defaults.
    }
    const shm::ShmPlan plan = shm::plan(local, shm::kDefaultChannels, segment);
    const uint64_t free = r["shm"]["free"].get<uint64_t>();
    const uint64_t need = plan.total_bytes();
    values.push_back(r["host"].get<std::string>() + ": " + shm::mib(free) + " free, " + std::to_string(local) +
                     " local rank" + (local == 1 ? "" : "s") + " need " + shm::mib(need));
    if (free < need) {
      // Only NCCL uses it: a CPU-only job (Gloo) runs, a GPU job on this host would crash.
      const Status s = r["gpus"].get<int>() > 0 ? Status::Fail : Status::Warn;
      if (row.status != Status::Fail) row.status = s;
      row.fix = shm::fixes(need)[0] + "; see ddx probe buserror --check --local-ranks " + std::to_string(local);
    }
  }
  row.value = join(values, "; ");
  return row;
}

std::string limit_text(const json& v) {
  if (v.is_null()) return "?";
  return v.get<int64_t>() < 0 ? "unlimited" : std::to_string(v.get<int64_t>());
}

// The rank with the lowest soft limit (unlimited counts as highest).
const json& lowest_limit(const Ranks& ranks, const std::string& key) {
  auto value = [&](const json& r) {
    const json& v = r["ulimits"][key];
    return v.is_null() || v.get<int64_t>() < 0 ? INT64_MAX : v.get<int64_t>();
  };
  return *std::min_element(ranks.begin(), ranks.end(), [&](const json& a, const json& b) { return value(a) < value(b); });
}

CheckRow check_nofile(const Ranks& ranks) {
  const json& r = lowest_limit(ranks, "nofile");
  const json& v = r["ulimits"]["nofile"];
  CheckRow row{"ulimit -n (open files)", Status::Pass, limit_text(v) + " (lowest: " + who(r) + ")"};
  if (!v.is_null() && v.get<int64_t>() >= 0 && v.get<int64_t>() < 65536) {
    row.status = Status::Warn;
    row.fix = "ulimit -n 1048576 (docker run --ulimit nofile=1048576): NCCL and Gloo open sockets per peer";
  }
  return row;
}

CheckRow check_memlock(const Ranks& ranks) {
  const json& r = lowest_limit(ranks, "memlock");
  const json& v = r["ulimits"]["memlock"];
  CheckRow row{"ulimit -l (locked memory)", Status::Pass, limit_text(v) + " (lowest: " + who(r) + ")"};
  const bool needs_pinning = r["gpus"].get<int>() > 0 || !r["infiniband"].empty();
  if (!v.is_null() && v.get<int64_t>() >= 0) {
    if (needs_pinning) {
      row.status = Status::Warn;
      row.fix = "docker run --ulimit memlock=-1 (or memlock unlimited in limits.conf): GPUs and RDMA pin memory";
    } else {
      row.value += "; no GPU or RDMA device, so nothing pins memory";
    }
  }
  return row;
}

CheckRow check_core(const Ranks& ranks) {
  const json& r = lowest_limit(ranks, "core");
  const json& v = r["ulimits"]["core"];
  CheckRow row{"ulimit -c (core dumps)", Status::Pass, limit_text(v) + " (lowest: " + who(r) + ")"};
  if (!v.is_null() && v.get<int64_t>() == 0) {
    row.status = Status::Warn;
    row.fix = "ulimit -c unlimited, if a crashed rank's core is wanted for gdb";
  }
  return row;
}

CheckRow check_clock(const Ranks& ranks) {
  CheckRow row{"clock skew between hosts"};
  // Per host: the smallest offset seen (store latency only ever adds to it).
  std::map<std::string, double> offset;
  for (const auto& r : ranks) {
    const std::string host = r["host"].get<std::string>();
    const double ms = r["clock_offset_ms"].get<double>();
    if (!offset.count(host) || std::fabs(ms) < std::fabs(offset[host])) offset[host] = ms;
  }
  if (offset.size() < 2) {
    row.status = Status::Skip;
    row.value = "skipped: one host";
    return row;
  }
  auto [lo, hi] = std::minmax_element(offset.begin(), offset.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
  char text[160];
  std::snprintf(text, sizeof text, "%.1f ms between %s and %s", hi->second - lo->second, hi->first.c_str(),
                lo->first.c_str());
  row.value = text;
  const double skew = hi->second - lo->second;
  if (skew > 1000) {
    row.status = Status::Fail;
  } else if (skew > 100) {
    row.status = Status::Warn;
  }
  if (row.status != Status::Pass) row.fix = "run chrony/ntpd on every host (skew makes logs and timeouts disagree)";
  return row;
}

CheckRow check_versions(const Ranks& ranks) {
  CheckRow row{"same versions on every rank"};
  std::set<std::string> components;
  for (const auto& r : ranks) {
    for (const auto& [k, v] : r["versions"].items()) components.insert(k);
  }
  std::vector<std::string> odd;
  for (const auto& c : components) {
    std::map<std::string, std::vector<std::string>> by_version;
    for (const auto& r : ranks) {
      const std::string v = r["versions"].contains(c) ? r["versions"][c].get<std::string>() : "missing";
      by_version[v].push_back(who(r));
    }
    if (by_version.size() < 2) continue;
    // The most common version is taken as intended; the others are named.
    auto common = std::max_element(by_version.begin(), by_version.end(),
                                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    for (const auto& [v, whom] : by_version) {
      if (v != common->first) odd.push_back(c + " " + v + " on " + join(whom) + " (others " + common->first + ")");
    }
  }
  if (odd.empty()) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : ranks.front()["versions"].items()) parts.push_back(k + " " + v.get<std::string>());
    const size_t hosts = one_per_host(ranks).size();
    row.value = "same on " + std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank" : " ranks") + " on " +
                std::to_string(hosts) + (hosts == 1 ? " host: " : " hosts: ") + join(parts);
  } else {
    row.status = Status::Fail;
    row.value = join(odd, "; ");
    row.fix = "install the same ddx/LibTorch/NCCL/MPI build on every host (a mixed job hangs or corrupts)";
  }
  return row;
}

// Bitwise checks between replicas (--replica-check-freq, --verify-init) assume every rank runs the
// same CPU kernels: ATen's (ATEN_CPU_CAPABILITY or the CPU's) and MKL's (MKL_CBWR,
// MKL_ENABLE_INSTRUCTIONS or the CPU's). Different kernels give different last bits, so a WARN:
// training is fine, those checks would stop it.
CheckRow check_cpu_kernels(const Ranks& ranks) {
  CheckRow row{"same CPU kernels on every rank"};
  std::map<std::string, std::vector<std::string>> by_kernels;
  for (const auto& r : ranks) {
    if (!r.contains("cpu_kernels")) {
      row.status = Status::Skip;
      row.value = "skipped: " + who(r) + " did not report its kernels";
      return row;
    }
    const json& k = r["cpu_kernels"];
    by_kernels["ATen " + k["aten"].get<std::string>() + ", MKL " + k["mkl"].get<std::string>()].push_back(who(r));
  }
  if (by_kernels.size() == 1) {
    row.value = by_kernels.begin()->first + " on " + std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank" : " ranks");
    return row;
  }
  auto common = std::max_element(by_kernels.begin(), by_kernels.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  std::vector<std::string> odd;
  for (const auto& [kernels, whom] : by_kernels) {
    if (kernels != common->first) odd.push_back(kernels + " on " + join(whom));
  }
  row.status = Status::Warn;
  row.value = join(odd, "; ") + " (others " + common->first + ")";
  row.fix = "export the same ATEN_CPU_CAPABILITY (e.g. avx2) and MKL_CBWR (e.g. AVX2) on every host: replicas on "
            "different kernels differ in the last bits, so --replica-check-freq and --verify-init stop a healthy run";
  return row;
}

CheckRow check_gpus(const Ranks& ranks) {
  CheckRow row{"GPUs vs local ranks"};
  std::vector<std::string> values;
  bool any = false;
  for (const auto& r : one_per_host(ranks)) {
    const int gpus = r["gpus"].get<int>(), local = r["local_world_size"].get<int>();
    any = any || gpus > 0;
    std::string v = r["host"].get<std::string>() + ": " + std::to_string(gpus) + " GPU" + (gpus == 1 ? "" : "s") +
                    " for " + std::to_string(local) + " local rank" + (local == 1 ? "" : "s");
    const std::string visible = env_of(r, "CUDA_VISIBLE_DEVICES");
    if (!visible.empty()) v += " (CUDA_VISIBLE_DEVICES=" + visible + ")";
    values.push_back(v);
    if (gpus > 0 && gpus < local) {
      row.status = Status::Fail;
      row.fix = "one GPU per local rank: start fewer ranks per node or widen CUDA_VISIBLE_DEVICES";
    }
  }
  if (!any) {
    row.status = Status::Skip;
    row.value = "skipped: no GPU";
    return row;
  }
  row.value = join(values, "; ");
  return row;
}

// Does interface `name` exist, under NCCL_SOCKET_IFNAME's rules: a prefix, or exact after '='?
bool interface_matches(const json& interfaces, const std::string& spec, bool exact) {
  for (const auto& i : interfaces) {
    const std::string name = i.get<std::string>();
    if (exact ? name == spec : name.rfind(spec, 0) == 0) return true;
  }
  return false;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

CheckRow check_interface_env(const Ranks& ranks) {
  CheckRow row{"interfaces named in env"};
  std::vector<std::string> problems, seen;
  for (const auto& r : ranks) {
    for (const std::string var : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"}) {
      std::string spec = env_of(r, var);
      if (spec.empty()) continue;
      if (spec[0] == '^') continue;  // an exclusion list names what not to use
      // NCCL: prefixes, '=' for an exact name; Gloo and TensorPipe: exact names.
      bool exact = var != std::string("NCCL_SOCKET_IFNAME");
      if (spec[0] == '=') {
        exact = true;
        spec = spec.substr(1);
      }
      for (const auto& name : split(spec, ',')) {
        if (!interface_matches(r["interfaces"], name, exact)) {
          problems.push_back(var + "=" + env_of(r, var) + " on " + who(r) + ": no interface '" + name + "'");
          std::vector<std::string> have;
          for (const auto& i : r["interfaces"]) have.push_back(i.get<std::string>());
          row.fix = "name an interface that exists on every host (" + r["host"].get<std::string>() + " has " + join(have, ",") +
                    ")" + (r["route_interface"].get<std::string>().empty() ? "" : "; the route to MASTER_ADDR uses " + r["route_interface"].get<std::string>());
        }
      }
      if (r["rank"].get<int>() == ranks.front()["rank"].get<int>()) seen.push_back(var + "=" + env_of(r, var));
    }
    const std::string hca = env_of(r, "NCCL_IB_HCA");
    if (!hca.empty() && hca[0] != '^') {
      for (auto name : split(hca[0] == '=' ? hca.substr(1) : hca, ',')) {
        name = name.substr(0, name.find(':'));  // mlx5_0:1 -> device mlx5_0
        if (!interface_matches(r["infiniband"], name, hca[0] == '=')) {
          problems.push_back("NCCL_IB_HCA=" + hca + " on " + who(r) + ": no RDMA device '" + name + "'");
          row.fix = "list the devices in /sys/class/infiniband (ibv_devices), or unset NCCL_IB_HCA";
        }
      }
    }
  }
  if (!problems.empty()) {
    row.status = Status::Fail;
    row.value = join(problems, "; ");
  } else {
    row.value = seen.empty() ? "none set (NCCL/Gloo choose)" : join(seen);
  }
  return row;
}

CheckRow check_master(const Ranks& ranks) {
  CheckRow row{"MASTER_ADDR from every rank"};
  std::vector<std::string> bad;
  for (const auto& r : ranks) {
    if (r.contains("master_error")) bad.push_back(who(r) + ": '" + r["master_addr"].get<std::string>() + "' " + r["master_error"].get<std::string>());
  }
  if (!bad.empty()) {
    row.status = Status::Fail;
    row.value = join(bad, "; ");
    row.fix = "set MASTER_ADDR to an address (or a name in DNS / /etc/hosts) every host resolves";
    return row;
  }
  const json& r = ranks.front();
  row.value = r["master_addr"].get<std::string>() + " -> " + join(r["master_resolved"].get<std::vector<std::string>>(), ",") +
              "; store reached by all " + std::to_string(ranks.size()) + " ranks";
  return row;
}

// The choice World::init makes on each host (net_interface.h): an error there stops every job
// at its first process group, so it FAILs here with the same line.
CheckRow check_gloo_interface(const Ranks& ranks) {
  CheckRow row{"interface Gloo will use"};
  std::vector<std::string> values, fixes;
  for (const auto& r : one_per_host(ranks)) {
    const std::string host = r["host"].get<std::string>();
    const json& g = r["gloo_interface"];
    const std::string error = g["error"].get<std::string>();
    if (error.empty()) {
      values.push_back(host + ": " + g["reason"].get<std::string>());
      continue;
    }
    row.status = Status::Fail;
    const size_t fix = error.find("; fix: ");
    values.push_back(host + ": " + error.substr(0, fix));
    if (fix != std::string::npos) fixes.push_back(error.substr(fix + 7) + " on " + host);
  }
  row.value = join(values, "; ");
  row.fix = join(fixes, "; ");
  return row;
}

// Each host's local rank 0 connected to every other host's listener on that host's Gloo
// address (doctor_command.cpp); an interface other hosts cannot reach fails here, not as a
// Gloo timeout at the first collective.
CheckRow check_reach(const Ranks& ranks) {
  CheckRow row{"hosts reach each other"};
  const Ranks hosts = one_per_host(ranks);
  if (hosts.size() < 2) {
    row.status = Status::Skip;
    row.value = "skipped: one host";
    return row;
  }
  std::vector<std::string> bad;
  size_t pairs = 0;
  for (const auto& r : hosts) {
    if (!r.contains("reach")) continue;
    for (const auto& link : r["reach"]) {
      ++pairs;
      if (!link["ok"].get<bool>()) {
        bad.push_back(r["host"].get<std::string>() + " -> " + link["host"].get<std::string>() + " at " +
                      link["address"].get<std::string>() + ": " + link["error"].get<std::string>());
      }
    }
  }
  if (!bad.empty()) {
    row.status = Status::Fail;
    row.value = join(bad, "; ");
    row.fix = "export GLOO_SOCKET_IFNAME=<an interface on the network the hosts share> (or open TCP between them)";
    return row;
  }
  row.value = std::to_string(pairs) + " connections between " + std::to_string(hosts.size()) +
              " hosts, each to the other's Gloo address";
  return row;
}

CheckRow check_disk(const Ranks& ranks) {
  CheckRow row{"free disk at the save folder"};
  const json* lowest = nullptr;
  for (const auto& r : ranks) {
    if (r["disk"]["free"].is_null()) {
      row.status = Status::Fail;
      row.value = who(r) + ": cannot read " + r["disk"]["path"].get<std::string>();
      row.fix = "create the save folder (--save-dir) on every host";
      return row;
    }
    if (!lowest || r["disk"]["free"].get<uint64_t>() < (*lowest)["disk"]["free"].get<uint64_t>()) lowest = &r;
  }
  const double free = static_cast<double>((*lowest)["disk"]["free"].get<uint64_t>());
  row.value = gib(free) + " at " + (*lowest)["disk"]["path"].get<std::string>() + " (lowest: " + who(*lowest) + ")";
  if (free < (1ULL << 30)) {
    row.status = Status::Fail;
  } else if (free < 10.0 * (1ULL << 30)) {
    row.status = Status::Warn;
  }
  if (row.status != Status::Pass) row.fix = "free space or point --save-dir elsewhere: a checkpoint write that runs out of disk loses the step";
  return row;
}

CheckRow check_omp(const Ranks& ranks) {
  CheckRow row{"OMP_NUM_THREADS vs cores"};
  const json& r = ranks.front();
  const int cores = r["cores"].get<int>(), local = r["local_world_size"].get<int>();
  const int per_rank = std::max(1, cores / local);
  row.value = std::to_string(cores) + " cores / " + std::to_string(local) + " local ranks";
  if (r["omp_num_threads"].is_null()) {
    row.status = Status::Warn;
    row.value += ", OMP_NUM_THREADS unset (each rank may start " + std::to_string(cores) + " threads)";
  } else {
    const std::string omp = r["omp_num_threads"].get<std::string>();
    row.value += ", OMP_NUM_THREADS=" + omp;
    const long threads = std::atol(omp.c_str());
    if (threads <= 0) {
      row.status = Status::Fail;
    } else if (threads * local > cores) {
      row.status = Status::Warn;
    }
  }
  if (row.status != Status::Pass) row.fix = "export OMP_NUM_THREADS=" + std::to_string(per_rank) + " (cores per local rank)";
  return row;
}

CheckRow check_cpu(const Ranks& ranks) {
  CheckRow row{"CPU governor and NUMA"};
  const json& r = ranks.front();
  const int numa = r["numa_nodes"].get<int>();
  row.value = std::to_string(numa) + " NUMA node" + (numa == 1 ? "" : "s") + ", governor ";
  if (r["governor"].is_null()) {
    row.value += "not exposed (no cpufreq in sysfs)";
  } else {
    const std::string g = r["governor"].get<std::string>();
    row.value += g;
    if (g == "powersave") {
      row.status = Status::Warn;
      row.fix = "cpupower frequency-set -g performance: powersave slows the host side of every step";
    }
  }
  return row;
}

}  // namespace

const char* to_string(Status status) {
  switch (status) {
    case Status::Pass: return "PASS";
    case Status::Warn: return "WARN";
    case Status::Fail: return "FAIL";
    case Status::Skip: return "SKIP";
  }
  return "?";
}

std::vector<CheckRow> evaluate(const std::vector<json>& ranks) {
  using Check = std::function<CheckRow(const Ranks&)>;
  static const std::vector<Check> checks = {
      check_shm,      check_nofile,         check_memlock,       check_core,   check_clock,
      check_versions, check_cpu_kernels, check_gpus,           check_interface_env, check_master, check_gloo_interface,
      check_reach,    check_disk,     check_omp,            check_cpu};
  std::vector<CheckRow> rows;
  for (const auto& check : checks) rows.push_back(check(ranks));
  return rows;
}

std::string format_table(const std::vector<CheckRow>& rows) {
  size_t name_width = 5;
  for (const auto& r : rows) name_width = std::max(name_width, r.name.size());
  std::ostringstream out;
  char line[64];
  std::snprintf(line, sizeof line, "%-*s  %-6s  ", static_cast<int>(name_width), "check", "status");
  out << line << "value\n";
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-*s  %-6s  ", static_cast<int>(name_width), r.name.c_str(), to_string(r.status));
    out << line << r.value << "\n";
    if (!r.fix.empty()) out << std::string(name_width + 10, ' ') << "fix: " << r.fix << "\n";
  }
  return out.str();
}

int exit_code(const std::vector<CheckRow>& rows) {
  for (const auto& r : rows) {
    if (r.status == Status::Fail) return 1;
  }
  return 0;
}

std::string failed_checks(const std::vector<CheckRow>& rows) {
  std::string out;
  for (const auto& r : rows) {
    if (r.status == Status::Fail) out += (out.empty() ? "FAIL: " : "; ") + r.name + " (" + r.value + ")";
  }
  return out;
}

json to_json(const std::vector<CheckRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    out.push_back({{"check", r.name}, {"status", to_string(r.status)}, {"value", r.value}, {"fix", r.fix}});
  }
  return out;
}

}  // namespace ddx::doctor
