// store-loss: the rendezvous store goes away under a running job. Under ddx launch (and torchrun
// without its agent store, and MASTER_ADDR/MASTER_PORT jobs) the store is a TCPStore server
// inside rank 0's process (runtime/src/dist/world.cpp), so the fault fires there: it shuts down
// every connection that server accepted (the sockets of this process whose local port is
// MASTER_PORT and that do not listen), and rank 0 trains on. Each rank's client, rank 0's own
// included, finds its connection closed, exactly as when the store's host dies, and c10d never
// reconnects a client. Killing rank 0 would be the `kill` fault; keeping rank 0 alive isolates
// what the ranks must detect on their own: the store, not a peer, is gone.
//
// The listening socket is left alone: under ddx launch it is the launcher's, handed to rank 0 of
// every attempt, so the restart gets a fresh store on the same port. Under torchrun's agent
// store the store is the agent's, not in any rank: the fault then refuses to fire, loudly.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ddx/processes/env.h"
#include "faults/faults.h"

namespace ddx::faults {
namespace {

// The local TCP port of socket `fd`, or -1 (not a socket, not TCP/IP, or a listening socket).
int accepted_socket_port(int fd) {
  int listening = 0;
  socklen_t size = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || listening != 0) return -1;
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return -1;
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return -1;
}

// Shuts down every accepted connection of this process on local port `port`; returns how many.
int drop_connections(int port) {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  const int own = ::dirfd(dir);
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd != own && accepted_socket_port(fd) == port && ::shutdown(fd, SHUT_RDWR) == 0) ++count;
  }
  ::closedir(dir);
  return count;
}

class StoreLoss : public Kind {
  std::string name() const override { return "store-loss"; }
  std::string category() const override { return "communication"; }
  std::string summary() const override { return "close every connection of the rendezvous store rank 0 hosts"; }
  void check(const FaultSpec& s) const override {
    if (s.rank != 0) s.fail("the rendezvous store is hosted by rank 0's process: give rank=0");
  }
  void at_step(const FaultSpec& s, int64_t) const override {
    const EnvMap env = current_env();
    const auto port = env_get(env, "MASTER_PORT");
    const std::string where = env_get(env, "MASTER_ADDR").value_or("?") + ":" + port.value_or("?");
    const int count = port ? drop_connections(std::atoi(port->c_str())) : 0;
    if (count == 0) {
      throw std::runtime_error("fault " + s.text + ": this process hosts no rendezvous store at " + where +
                               " (under torchrun the agent hosts it: run the fault under ddx launch)");
    }
    log_firing(s, "closed the " + std::to_string(count) + " connections of the rendezvous store at " + where);
  }
};

}  // namespace

const Kind& store_loss_kind() {
  static const StoreLoss kind;
  return kind;
}

}  // namespace ddx::faults
