// Level 1 in order: the node (the doctor's rows, memory, clock), the GPUs (NVML's count against
// the PCI bus, each GPU's NVML rows and its XIDs), XIDs of devices NVML does not list, machine
// checks, then the --path folders. Each section reads its own facts and judges them with the pure
// functions of its level1_*.h; this file only gathers and orders.
#include "health/level1.h"

#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "ddx/nvml.h"
#include "ddx/version.h"
#include "gpu/gpu_facts.h"
#include "gpu/xid_log.h"
#include "health/level1_gpus.h"
#include "health/level1_kernel_log.h"
#include "health/level1_node.h"
#include "health/level1_paths.h"
#include "health/level1_rows.h"

namespace ddx::health {
namespace {

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

double uptime_seconds() {
  struct sysinfo info {};
  return ::sysinfo(&info) == 0 ? static_cast<double>(info.uptime) : 0;
}

std::string driver_version(const Nvml& nvml) {
  char text[96] = {};
  const auto& api = nvml.api();
  return api.system_driver_version && api.system_driver_version(text, sizeof text) == kNvmlSuccess ? text : "";
}

// What a bug report needs, without LibTorch: ddx, MPI, compiler, the kernel and the NVIDIA driver.
std::vector<std::pair<std::string, std::string>> node_versions(const std::string& driver) {
  auto versions = version_report();
  struct utsname u {};
  if (::uname(&u) == 0) versions.emplace_back("kernel", u.release);
  versions.emplace_back("nvidia driver", driver.empty() ? "none" : driver);
  return versions;
}

std::string temp_folder(const EnvMap& env) {
  const auto tmp = env_get(env, "TMPDIR");
  return tmp && !tmp->empty() ? *tmp : "/tmp";
}

std::string cpu_model(const std::string& cpuinfo_path) {
  std::ifstream in(cpuinfo_path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace

std::vector<Check> level1_checks(const Level1Options& options, const EnvMap& env) {
  const std::string host = host_name();
  std::string nvml_error;
  const std::unique_ptr<Nvml> nvml = Nvml::load(nvml_error);
  bool log_readable = false;
  const std::vector<std::string> log = gpu::read_kernel_log(log_readable);
  const std::vector<gpu::GpuFacts> gpus =
      nvml ? gpu::read_gpu_facts(*nvml, host, -1, log, log_readable) : std::vector<gpu::GpuFacts>{};
  const std::string driver = nvml ? driver_version(*nvml) : "";

  NodeFacts node;
  node.host = host;
  node.gpus = static_cast<int>(gpus.size());
  node.local_ranks = options.local_ranks > 0 ? options.local_ranks : std::max(1, node.gpus);
  node.versions = node_versions(driver);
  node.shm_path = options.shm_path;
  node.sysfs_root = options.sysfs_root;
  node.cpuinfo_path = options.cpuinfo_path;
  node.disk_path = temp_folder(env);
  std::vector<Check> rows = doctor_checks_of_node(node, env);
  rows.push_back(judge_memory(read_memory(options.meminfo_path)));
  rows.push_back(judge_clock(read_clock()));

  rows.push_back(gpu_count_check(node.gpus, nvidia_gpus_on_pci_bus(options.sysfs_root), nvml_error, driver));
  // kernel_log_checks gives one row per GPU first, in the order of `gpus`, then the rest.
  const std::vector<Check> log_rows = kernel_log_checks(log, log_readable, gpus);
  const double uptime = uptime_seconds();
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (Check& row : nvml_gpu_rows(gpus[i], uptime)) rows.push_back(std::move(row));
    rows.push_back(log_rows[i]);
  }
  rows.insert(rows.end(), log_rows.begin() + static_cast<long>(gpus.size()), log_rows.end());

  for (Check& row : path_checks(options.paths)) rows.push_back(std::move(row));
  return rows;
}

std::string node_device_model(const Level1Options& options) {
  std::string why;
  if (const std::unique_ptr<Nvml> nvml = Nvml::load(why)) {
    const NvmlApi& api = nvml->api();
    unsigned count = 0;
    nvmlDevice device = nullptr;
    char name[96] = {};
    if (api.device_count(&count) == kNvmlSuccess && count > 0 && api.handle_by_index(0, &device) == kNvmlSuccess &&
        api.name(device, name, sizeof name) == kNvmlSuccess) {
      return name;
    }
  }
  const std::string cpu = cpu_model(options.cpuinfo_path);
  return cpu.empty() ? "unknown CPU" : cpu;
}

}  // namespace ddx::health
