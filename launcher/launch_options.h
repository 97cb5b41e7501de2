#pragma once
// What `ddx launch` was asked to do, validated, with every default filled in.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx::launcher {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;          // 0: a free port on this host (single node only)
  std::string log_dir;          // empty: console only
  bool tee = false;             // with log_dir: console as well
  int max_restarts = 0;
  double monitor_interval_s = 0.1;
  double grace_period_s = 5.0;  // SIGTERM -> SIGKILL
  std::string run_id;           // empty: generated
  // Non-empty: the workers get a private /dev/shm of this size ("64m", "1G": a byte count, as
  // `ddx probe buserror --shm-size` reads it), a tmpfs in a mount namespace of this launcher; the
  // node's own /dev/shm is never touched. validate() sets shm_bytes from it.
  std::string shm_size;
  uint64_t shm_bytes = 0;
  std::vector<std::string> command;  // command[0] resolved to an absolute path by validate()
  // With a port picked here: the socket already bound and listening on it, handed to rank 0
  // (DDX_STORE_LISTEN_FD) so its TCPStore serves on it. Nobody can take the port in between,
  // which matters when several jobs start at once (tests under ctest -j). -1: none.
  int store_listen_fd = -1;
};

// Checks ranges and the command and fills in derived values (free port, run id, absolute
// executable path). Throws ddx::UsageError with one line naming the flag at fault.
void validate(LaunchOptions& options);

// PATH lookup like execvp's; throws UsageError when not found or not executable.
std::string resolve_executable(const std::string& name);

// A socket bound to a free port and listening (close-on-exec); returns the fd and sets `port`.
// Picking a port and closing it again (torchrun --standalone) lets another process take it
// before the workers bind it; holding it open does not.
int listen_on_free_port(int& port);

}  // namespace ddx::launcher
