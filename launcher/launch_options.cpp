#include "ddx/text/byte_sizes.h"
#include "launcher/launch_options.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "ddx/errors/errors.h"

namespace ddx::launcher {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// One node: the time and this launcher's pid tell reruns apart. Several nodes: every node's
// launcher must name the same job (the analyzer ignores dumps of another job), and they cannot
// agree on a pid, so the id comes from what they share: the rendezvous address and port (and
// SLURM's job id when there is one). --run-id tells reruns on one address apart.
std::string generated_run_id(const LaunchOptions& o) {
  if (o.nnodes > 1) {
    const char* slurm = std::getenv("SLURM_JOB_ID");
    return "ddx-" + o.master_addr + "-" + std::to_string(o.master_port) + (slurm && *slurm ? std::string("-") + slurm : "");
  }
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
  return "ddx-" + std::to_string(seconds) + "-" + std::to_string(::getpid());
}

}  // namespace

std::string resolve_executable(const std::string& name) {
  if (name.empty()) throw UsageError("ddx launch: the command to run is empty");
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), F_OK) != 0) throw UsageError("ddx launch: command not found: " + name);
    if (!is_executable_file(name)) throw UsageError("ddx launch: command is not an executable file: " + name);
    if (name[0] == '/') return name;
    char cwd[4096];
    if (!::getcwd(cwd, sizeof cwd)) return name;
    return std::string(cwd) + "/" + name;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  throw UsageError("ddx launch: command not found in PATH: " + name);
}

int listen_on_free_port(int& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1024) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("cannot listen on a free port: ") + std::strerror(err));
  }
  port = ntohs(addr.sin_port);
  return fd;
}

void validate(LaunchOptions& o) {
  if (o.nproc_per_node < 1) throw UsageError("ddx launch: --nproc-per-node must be at least 1");
  if (o.nnodes < 1) throw UsageError("ddx launch: --nnodes must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw UsageError("ddx launch: --node-rank " + std::to_string(o.node_rank) +
                     " is outside [0, " + std::to_string(o.nnodes) + ") for --nnodes " +
                     std::to_string(o.nnodes));
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    throw UsageError("ddx launch: --master-port " + std::to_string(o.master_port) +
                     " is outside 0..65535");
  }
  if (o.nnodes > 1 && o.master_port == 0) {
    // Every node must agree on the port; a free port picked here is unknown to the others.
    throw UsageError("ddx launch: --master-port is required with --nnodes > 1");
  }
  if (o.master_addr.empty()) throw UsageError("ddx launch: --master-addr is empty");
  if (o.max_restarts < 0) throw UsageError("ddx launch: --max-restarts must be >= 0");
  if (o.nnodes > 1 && o.master_port + o.max_restarts > 65535) {
    // Attempt k of a multi-node job rendezvouses at --master-port + k (worker_env.cpp).
    throw UsageError("ddx launch: --master-port " + std::to_string(o.master_port) + " + --max-restarts " +
                     std::to_string(o.max_restarts) + " is past port 65535 (attempt k uses the port + k)");
  }
  if (!(o.monitor_interval_s > 0)) throw UsageError("ddx launch: --monitor-interval must be > 0 seconds");
  if (o.grace_period_s < 0) throw UsageError("ddx launch: --grace-period must be >= 0 seconds");
  if (o.tee && o.log_dir.empty()) throw UsageError("ddx launch: --tee needs --log-dir");
  if (!o.shm_size.empty()) {
    // Parsed here, not handed to mount(2) as text, where a comma would add mount options.
    o.shm_bytes = ddx::parse_bytes("ddx launch: --shm-size", o.shm_size);
    if (o.shm_bytes == 0) {
      throw UsageError("ddx launch: --shm-size " + o.shm_size + " must be above 0 (tmpfs reads size 0 as no limit)");
    }
  }
  if (o.command.empty()) {
    throw UsageError("ddx launch: no command given (usage: ddx launch [flags] -- CMD ARGS...)");
  }
  o.command[0] = resolve_executable(o.command[0]);
  // Workers get paths under it (TORCHELASTIC_ERROR_FILE); one that changes directory must
  // still write to the right place.
  if (!o.log_dir.empty()) o.log_dir = std::filesystem::absolute(o.log_dir).lexically_normal().string();
  if (o.master_port == 0) o.store_listen_fd = listen_on_free_port(o.master_port);
  if (o.run_id.empty()) o.run_id = generated_run_id(o);
}

}  // namespace ddx::launcher
