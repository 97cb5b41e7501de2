// The job's store and groups: rank 0 hosts a TCPStore at the master endpoint (under torchrun
// the agent does), every rank connects, the world group is built over it, and subgroups get
// their own store prefixes.
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/cuda.h>
#ifdef DDX_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <mpi.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

#include "ddx/rendezvous/cpu_threads.h"
#include "ddx/errors/errors.h"
#include "ddx/rendezvous/gpu_placement.h"
#include "ddx/text/log.h"
#include "ddx/rendezvous/net_interface.h"
#include "ddx/process_group.h"
#include "ddx/watchdog/store_lost.h"
#include "store_host.h"

namespace ddx {
namespace {

std::string seconds(std::chrono::milliseconds ms) {
  std::ostringstream out;
  out << ms.count() / 1000.0 << " s";
  return out.str();
}

// `ddx launch` binds the store's port itself and hands rank 0 the listening socket, so no
// other process can take the port between the pick and the bind. Used only when the fd really
// is a listening socket on `port` (a child of rank 0 inherits the variable, not the socket's
// meaning); the variable is removed so nothing started from here sees it.
std::optional<int> inherited_listen_fd(int port) {
  const char* text = std::getenv("DDX_STORE_LISTEN_FD");
  if (text == nullptr) return std::nullopt;
  const int fd = std::atoi(text);
  ::unsetenv("DDX_STORE_LISTEN_FD");
  int listening = 0;
  socklen_t len = sizeof listening;
  sockaddr_in addr{};
  socklen_t addr_len = sizeof addr;
  if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0 || addr.sin_family != AF_INET ||
      ntohs(addr.sin_port) != port) {
    return std::nullopt;
  }
  return fd;
}

c10::intrusive_ptr<c10d::Store> connect_tcp_store(const std::string& host, int port, int rank,
                                                  int world_size,
                                                  std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = (rank == 0);
  opts.numWorkers = static_cast<std::size_t>(world_size);
  opts.waitWorkers = true;  // rank 0 returns only once every rank is connected, or times out
  opts.timeout = timeout;
  if (rank == 0) opts.masterListenFd = inherited_listen_fd(port);
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, opts);
  } catch (const std::exception& e) {
    std::ostringstream what;
    if (rank == 0) {
      what << "rendezvous failed: rank 0 hosting the store at " << host << ":" << port
           << " for " << world_size << " ranks (timeout " << seconds(timeout) << "): " << e.what();
    } else {
      what << "rendezvous failed: rank " << rank << " could not join the store at " << host
           << ":" << port << " within " << seconds(timeout)
           << " (is rank 0 running, and MASTER_ADDR/MASTER_PORT right?): " << e.what();
    }
    throw std::runtime_error(what.str());
  }
}

// Under torchrun the agent already hosts a TCPStore at MASTER_ADDR:MASTER_PORT
// (TORCHELASTIC_USE_AGENT_STORE=True), so every rank, rank 0 included, joins it as a client. The
// agent keeps that store for the whole run, across restarts: the restarted workers would find
// the failed attempt's keys (Gloo's rendezvous addresses, the world's check-out count) and pair
// with processes that are gone. So, as PyTorch's env:// rendezvous does under the agent store,
// every key of an attempt lives under its own prefix, /worker/attempt_<TORCHELASTIC_RESTART_COUNT>.
c10::intrusive_ptr<c10d::Store> join_agent_store(const RendezvousInfo& info, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(info.master_port);
  opts.isServer = false;
  opts.waitWorkers = false;  // the agent's store is no one's to wait on; Gloo waits for its peers' keys
  opts.timeout = timeout;
  try {
    auto agent = c10::make_intrusive<c10d::TCPStore>(info.master_addr, opts);
    return c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(info.restart_count), agent);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw std::runtime_error("rendezvous failed: rank " + std::to_string(info.rank) + " could not join torchrun's store at " +
                             info.master_addr + ":" + std::to_string(info.master_port) + " within " + seconds(timeout) +
                             ": " + what.substr(0, what.find('\n')));
  }
}

// Under mpiexec/srun --mpi without a master endpoint: rank 0 opens the store on a free port
// and tells everyone over MPI. Returns whether MPI was initialized here.
c10::intrusive_ptr<c10d::Store> store_over_mpi(RendezvousInfo& info,
                                               std::chrono::milliseconds timeout,
                                               bool* initialized_here) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  *initialized_here = !initialized;
  int mpi_rank = 0, mpi_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  if (mpi_rank != info.rank || mpi_size != info.world_size) {
    std::ostringstream what;
    what << "MPI says rank " << mpi_rank << "/" << mpi_size << " but the environment says rank "
         << info.rank << "/" << info.world_size;
    throw UsageError(what.str());
  }
  char host[256] = {0};
  int port = 0;
  c10::intrusive_ptr<c10d::Store> store;
  if (info.rank == 0) {
    std::string advertised = info.master_addr.empty() ? info.hostname : info.master_addr;
    if (info.master_addr == "127.0.0.1" && !info.hostname.empty()) advertised = info.hostname;
    c10d::TCPStoreOptions opts;
    opts.port = 0;
    opts.isServer = true;
    opts.numWorkers = static_cast<std::size_t>(info.world_size);
    opts.waitWorkers = false;  // the others learn the port below, then connect
    opts.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(advertised, opts);
    port = tcp->getPort();
    std::strncpy(host, advertised.c_str(), sizeof(host) - 1);
    store = tcp;
  }
  MPI_Bcast(host, sizeof(host), MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  info.master_addr = host;
  info.master_port = port;
  if (info.rank != 0) {
    store = connect_tcp_store(host, port, info.rank, info.world_size, timeout);
  }
  // Every rank connected before anyone builds a group on the store.
  MPI_Barrier(MPI_COMM_WORLD);
  return store;
}

}  // namespace

World::World(RendezvousInfo info, ProcessGroupOptions options)
    : info_(std::move(info)), options_(options) {}

std::unique_ptr<World> World::init(const RendezvousInfo& info, const ProcessGroupOptions& options) {
  std::unique_ptr<World> world(new World(info, options));
  RendezvousInfo& ri = world->info_;
  // Before anything computes: the kernels' thread count, the same whichever launcher started
  // this rank (ddx/rendezvous/cpu_threads.h). Programs say it in their first line (ddx train's banner).
  world->cpu_threads_ = choose_cpu_threads(current_env(), ri.local_world_size, cores_in_affinity_mask());
  at::set_num_threads(world->cpu_threads_.count);
  log::debug("cpu threads: ", world->cpu_threads_.count, " (", world->cpu_threads_.reason, ")");
#ifdef DDX_WITH_CUDA
  // NCCL binds a communicator to the current device: pick ours before any group exists.
  if (options.enable_nccl && torch::cuda::is_available()) {
    const int devices = static_cast<int>(torch::cuda::device_count());
    if (const std::string shared = shared_gpu_problem(ri.local_rank, ri.local_world_size, devices); !shared.empty()) {
      throw UsageError(shared);
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(ri.local_rank % devices));
  }
#endif
  if (ri.world_size == 1) {
    world->store_ = c10::make_intrusive<c10d::HashStore>();
  } else if (ri.mpi_bootstrap) {
    world->store_ = store_over_mpi(ri, options.store_timeout, &world->mpi_initialized_here_);
  } else {
    if (ri.master_port == 0) {
      throw UsageError("no master port for a " + std::to_string(ri.world_size) +
                       "-rank job: set MASTER_PORT (or launch with ddx launch / torchrun)");
    }
    // The interface Gloo will use, decided (and logged, or refused with one line) before the
    // store connection, so that it is the rank's first line and a bad setting fails at once.
    gloo_interface_choice(ri.master_addr);
    world->store_ = detail::agent_hosts_store(ri)
                        ? join_agent_store(ri, options.store_timeout)
                        : connect_tcp_store(ri.master_addr, ri.master_port, ri.rank, ri.world_size,
                                            options.store_timeout);
  }
  std::vector<int> all(ri.world_size);
  for (int r = 0; r < ri.world_size; ++r) all[r] = r;
  world->world_ = std::make_unique<Group>("world", ri.rank, all, world->store_, options,
                                          ri.master_addr);
  log::debug("world ready: ", ri.describe());
  return world;
}

World::~World() {
  try {
    shutdown();
  } catch (const std::exception& e) {  // a destructor must not throw; an explicit shutdown() did
    log::error(e.what());
  }
}

Group* World::new_group(const std::string& name, const std::vector<int>& ranks) {
  if (ranks.empty()) throw std::invalid_argument("group " + name + " has no ranks");
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= info_.world_size || !seen.insert(r).second) {
      throw std::invalid_argument("group " + name + ": rank " + std::to_string(r) +
                                  " is out of range or repeated");
    }
  }
  if (name == "world") throw std::invalid_argument("group name 'world' is reserved");
  for (const auto& g : groups_) {
    if (g->name() == name) throw std::invalid_argument("group " + name + " exists already");
  }
  auto it = std::find(ranks.begin(), ranks.end(), info_.rank);
  if (it == ranks.end()) return nullptr;
  const int group_rank = static_cast<int>(it - ranks.begin());
  groups_.push_back(std::make_unique<Group>(name, group_rank, ranks, store_, options_,
                                            info_.master_addr));
  return groups_.back().get();
}

DeviceMesh& World::mesh(const std::vector<std::pair<std::string, int>>& dims) {
  meshes_.push_back(std::make_unique<DeviceMesh>(*this, dims));
  return *meshes_.back();
}

void World::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // Rank 0 hosts the store: if it left first, ranks still building a subgroup (which only
  // some ranks join) or reading a key would lose it. So every rank checks out through the
  // store and rank 0 waits for all of them — unless an operation is still pending somewhere,
  // i.e. the job is failing and peers may never check out.
  bool busy = world_ && world_->pending()->load() > 0;
  for (const auto& g : groups_) busy = busy || g->pending()->load() > 0;
  // A store that is gone by now went away during the run (nothing else is using it here): the
  // run must fail saying so, never end as if clean, after the groups are released as usual.
  std::optional<StoreLost> lost;
  if (store_ && info_.world_size > 1 && !busy) {
    try {
      detail::QuietStoreLogs quiet;
      try {
        store_->add("ddx/world/checked_out", 1);
        if (info_.rank == 0) {
          const auto deadline = std::chrono::steady_clock::now() + options_.store_timeout;
          while (store_->add("ddx/world/checked_out", 0) < info_.world_size &&
                 std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }
      } catch (const std::exception&) {
        detail::rethrow_store_failure(detail::store_identity(info_));
      }
    } catch (const StoreLost& e) {
      lost = e;
    } catch (const std::exception& e) {
      const std::string what = e.what();
      log::warn("shutdown: could not check out through the store: ", what.substr(0, what.find('\n')));
    }
  }
  for (auto it = groups_.rbegin(); it != groups_.rend(); ++it) (*it)->shutdown();
  if (world_) world_->shutdown();
  if (mpi_initialized_here_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  if (lost) throw *lost;
}

}  // namespace ddx
