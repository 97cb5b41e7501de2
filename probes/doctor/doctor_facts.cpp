#include "doctor/doctor_facts.h"

#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>

#include "buserror/shm_model.h"
#include "ddx/rendezvous/net_interface.h"

namespace ddx::doctor {
namespace {

using nlohmann::json;

json limit(int resource) {
  struct rlimit l {};
  if (::getrlimit(resource, &l) != 0) return nullptr;
  return l.rlim_cur == RLIM_INFINITY ? json(-1) : json(static_cast<int64_t>(l.rlim_cur));
}

json interfaces() {
  std::set<std::string> names;
  if (struct if_nameindex* all = ::if_nameindex()) {
    for (auto* i = all; i->if_index != 0; ++i) names.insert(i->if_name);
    ::if_freenameindex(all);
  }
  return json(names);
}

json read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return nullptr;
  return line;
}

int numa_nodes(const std::string& sysfs) {
  int n = 0;
  std::error_code error;
  for (const auto& e : std::filesystem::directory_iterator(sysfs + "/devices/system/node", error)) {
    const std::string name = e.path().filename();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4]))) ++n;
  }
  return n;
}

std::string cpuinfo_flags(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return line.substr(line.find(':') == std::string::npos ? 0 : line.find(':') + 1);
  }
  return "";
}

}  // namespace

std::string cpu_isa(const std::string& flags) {
  std::set<std::string> have;
  std::istringstream words(flags);
  for (std::string w; words >> w;) have.insert(w);
  if (have.count("avx512f") && have.count("amx_tile")) return "avx512_amx";
  if (have.count("avx512f") && have.count("avx512_vnni")) return "avx512_vnni";
  if (have.count("avx512f")) return "avx512";
  if (have.count("avx2")) return "avx2";
  if (have.count("avx")) return "avx";
  if (have.count("sse4_2")) return "sse4_2";
  return "older";
}

std::string mkl_branch(const EnvMap& env, const std::string& isa) {
  if (auto cbwr = env_get(env, "MKL_CBWR"); cbwr && !cbwr->empty()) return "MKL_CBWR=" + *cbwr;
  if (auto cap = env_get(env, "MKL_ENABLE_INSTRUCTIONS"); cap && !cap->empty()) {
    return "MKL_ENABLE_INSTRUCTIONS=" + *cap + " on " + isa;
  }
  return "auto on " + isa;
}

json collect_facts(const EnvMap& env, const FactsInput& in) {
  json f;
  f["host"] = in.info.hostname;
  f["rank"] = in.info.rank;
  f["local_rank"] = in.info.local_rank;
  f["local_world_size"] = in.info.local_world_size;
  f["num_nodes"] = in.info.num_nodes;
  f["versions"] = json::object();
  for (const auto& [component, version] : in.versions) f["versions"][component] = version;

  const shm::ShmSpace space = shm::space_of(in.shm_path);
  f["shm"] = {{"path", space.path}, {"size", space.size_bytes}, {"free", space.free_bytes}, {"tmpfs", space.is_tmpfs}};
  f["ulimits"] = {{"nofile", limit(RLIMIT_NOFILE)}, {"memlock", limit(RLIMIT_MEMLOCK)}, {"core", limit(RLIMIT_CORE)}};

  cpu_set_t cpus;
  f["cores"] = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  auto omp = env_get(env, "OMP_NUM_THREADS");
  f["omp_num_threads"] = omp ? json(*omp) : json(nullptr);

  f["env"] = json::object();
  for (const auto& [key, value] : env) {
    if (key.rfind("NCCL_", 0) == 0 || key.rfind("GLOO_", 0) == 0 || key == "CUDA_VISIBLE_DEVICES" ||
        key == "TP_SOCKET_IFNAME") {
      f["env"][key] = value;
    }
  }
  f["interfaces"] = interfaces();
  f["infiniband"] = json::array();
  std::error_code error;
  for (const auto& e : std::filesystem::directory_iterator(in.sysfs_root + "/class/infiniband", error)) {
    f["infiniband"].push_back(e.path().filename().string());
  }

  f["master_addr"] = in.info.master_addr;
  std::string resolve_error;
  const auto master = resolve_host(in.info.master_addr, &resolve_error);
  if (!master.empty()) {
    f["master_resolved"] = master;
  } else {
    f["master_error"] = resolve_error;
  }
  // The interface this rank's Gloo will use, decided as World::init decides it.
  const auto gloo = env_get(env, "GLOO_SOCKET_IFNAME");
  InterfaceFacts net = probe_interface_facts(gloo ? *gloo : "", in.info.master_addr, in.info.hostname);
  if (net.hostname_addresses.empty() && in.resolve_hostname) net.hostname_addresses = resolve_host(in.info.hostname);
  const InterfaceChoice choice = choose_interface(net);
  f["route_interface"] = net.route_interface;
  f["hostname_resolved"] = net.hostname_addresses;
  f["gloo_interface"] = {{"interface", choice.interface}, {"address", choice.address}, {"reason", choice.reason},
                         {"error", choice.error}};

  struct statvfs disk {};
  std::string save = std::filesystem::absolute(in.save_dir).lexically_normal().string();
  if (save.size() > 1 && save.back() == '/') save.pop_back();  // "/tmp/." normalizes to "/tmp/"
  f["disk"] = {{"path", save},
               {"free", ::statvfs(save.c_str(), &disk) == 0 ? json(static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize) : json(nullptr)}};
  f["numa_nodes"] = numa_nodes(in.sysfs_root);
  f["governor"] = read_line(in.sysfs_root + "/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  f["gpus"] = in.gpus;
  f["clock_offset_ms"] = 0.0;
  // Replicas compare bits (replica checks, --verify-init): ranks whose kernels differ differ in
  // the last bits of init, matmuls and AdamW although nothing is wrong (docs/thresholds.md).
  const auto aten_env = env_get(env, "ATEN_CPU_CAPABILITY");
  f["cpu_kernels"] = {{"aten", in.aten_capability.empty() ? "unknown" : in.aten_capability},
                      {"aten_env", aten_env ? json(*aten_env) : json(nullptr)},
                      {"mkl", mkl_branch(env, cpu_isa(cpuinfo_flags(in.cpuinfo_path)))}};
  return f;
}

namespace {

addrinfo* numeric(const std::string& address, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  return ::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) == 0 ? found : nullptr;
}

}  // namespace

ReachListener::ReachListener(const std::string& address) {
  addrinfo* a = numeric(address, 0);
  if (!a) return;
  fd_ = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (fd_ >= 0 && ::bind(fd_, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd_, 64) == 0 &&
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  ::freeaddrinfo(a);
}

ReachListener::~ReachListener() {
  if (fd_ >= 0) ::close(fd_);
}

json connect_to(const std::string& host, const std::string& address, int port, int timeout_ms) {
  json link = {{"host", host}, {"address", address + ":" + std::to_string(port)}, {"ok", false}, {"error", ""}};
  addrinfo* a = numeric(address, port);
  if (!a) {
    link["error"] = "not a numeric address";
    return link;
  }
  const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int error = fd < 0 ? errno : 0;
  if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      error = ETIMEDOUT;
      if (::poll(&p, 1, timeout_ms) == 1) {
        socklen_t len = sizeof error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
      }
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(a);
  link["ok"] = error == 0;
  if (error != 0) link["error"] = std::strerror(error);
  return link;
}

}  // namespace ddx::doctor
