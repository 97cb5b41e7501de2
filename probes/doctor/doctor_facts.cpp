#include "doctor/doctor_facts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "buserror/shm_model.h"

namespace ddx::doctor {
namespace {

using nlohmann::json;

json limit(int resource) {
  struct rlimit l {};
  if (::getrlimit(resource, &l) != 0) return nullptr;
  return l.rlim_cur == RLIM_INFINITY ? json(-1) : json(static_cast<int64_t>(l.rlim_cur));
}

std::string address_text(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  } else if (addr->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

// Addresses `host` resolves to, or the resolver's error as a string.
json resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) return ::gai_strerror(rc);
  std::set<std::string> addresses;
  for (addrinfo* a = found; a; a = a->ai_next) addresses.insert(address_text(a->ai_addr));
  ::freeaddrinfo(found);
  return json(addresses);
}

// The interface the kernel would use to reach `address`: connect a UDP socket (sends nothing)
// and look up which interface owns the local address it was given.
std::string route_interface(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), "9", &hints, &found) != 0) return "";
  std::string local;
  int fd = ::socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage self{};
    socklen_t len = sizeof self;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
      local = address_text(reinterpret_cast<sockaddr*>(&self));
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  ifaddrs* ifs = nullptr;
  if (local.empty() || ::getifaddrs(&ifs) != 0) return "";
  std::string name;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (i->ifa_addr && address_text(i->ifa_addr) == local) name = i->ifa_name;
  }
  ::freeifaddrs(ifs);
  return name;
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

}  // namespace

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
  const json master = resolve(in.info.master_addr);
  if (master.is_array()) {
    f["master_resolved"] = master;
  } else {
    f["master_error"] = master;
  }
  f["route_interface"] = route_interface(in.info.master_addr);
  const json self = resolve(in.info.hostname);
  f["hostname_resolved"] = self.is_array() ? self : json::array();

  struct statvfs disk {};
  std::string save = std::filesystem::absolute(in.save_dir).lexically_normal().string();
  if (save.size() > 1 && save.back() == '/') save.pop_back();  // "/tmp/." normalizes to "/tmp/"
  f["disk"] = {{"path", save},
               {"free", ::statvfs(save.c_str(), &disk) == 0 ? json(static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize) : json(nullptr)}};
  f["numa_nodes"] = numa_nodes(in.sysfs_root);
  f["governor"] = read_line(in.sysfs_root + "/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  f["gpus"] = in.gpus;
  f["clock_offset_ms"] = 0.0;
  return f;
}

}  // namespace ddx::doctor
