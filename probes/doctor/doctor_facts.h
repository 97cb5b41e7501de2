#pragma once
// What `ddx doctor` measures on one rank, as JSON, so that rank 0 can judge every rank's facts
// together (doctor_checks.h) and tests can feed it any facts: a 64 MiB /dev/shm, a skewed
// clock, another version, an interface that does not exist. No LibTorch here.
//
// Keys: host, rank, local_rank, local_world_size, num_nodes, versions {component: version},
// shm {path, size, free, tmpfs}, ulimits {nofile, memlock, core} (-1 = unlimited), cores,
// omp_num_threads (null when unset), env {NCCL_*, GLOO_*, CUDA_VISIBLE_DEVICES, ...},
// interfaces [names], master_addr, master_resolved [addresses] or master_error, route_interface
// (the interface that routes to MASTER_ADDR), hostname_resolved [addresses], disk {path, free},
// numa_nodes, governor (null when no cpufreq), gpus, clock_offset_ms (set by the command),
// cpu_kernels {aten, mkl} (which CPU kernels compute this rank's bits; see check_cpu_kernels).
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "ddx/processes/env.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx::doctor {

struct FactsInput {
  RendezvousInfo info;
  std::string save_dir = ".";                                       // where checkpoints go
  std::vector<std::pair<std::string, std::string>> versions;        // ddx, libtorch, nccl, mpi...
  int gpus = 0;                                                     // visible CUDA devices
  std::string shm_path = "/dev/shm";
  std::string sysfs_root = "/sys";                                  // NUMA, cpufreq, infiniband
  std::string cpuinfo_path = "/proc/cpuinfo";                       // the ISA MKL dispatches on
  std::string aten_capability;                                      // at::get_cpu_capability(), "" unknown
  // Look this host's name up when routing did not (the loopback-hostname check): false skips a
  // name lookup that may wait on an unreachable DNS server (`ddx health` on one node).
  bool resolve_hostname = true;
};

// The widest instruction set MKL would dispatch to on a CPU with these /proc/cpuinfo flags:
// "avx512_amx", "avx512_vnni", "avx512", "avx2", "avx", "sse4_2" or "older".
std::string cpu_isa(const std::string& cpuinfo_flags);

// The code branch MKL takes on this rank: MKL_CBWR pins it (identical bits across CPUs),
// MKL_ENABLE_INSTRUCTIONS caps it, otherwise MKL picks the CPU's widest ISA.
std::string mkl_branch(const EnvMap& env, const std::string& isa);

nlohmann::json collect_facts(const EnvMap& env, const FactsInput& input);

// Whether hosts reach each other on their Gloo addresses: each host's local rank 0 listens on
// its address (connections complete in the kernel's backlog, so nobody needs to accept) and
// connects to every other host's listener. The listener lives as long as this object.
class ReachListener {
 public:
  explicit ReachListener(const std::string& address);  // port 0: the kernel picks one
  ~ReachListener();
  ReachListener(const ReachListener&) = delete;
  ReachListener& operator=(const ReachListener&) = delete;
  int port() const { return port_; }  // 0 when it could not listen

 private:
  int fd_ = -1;
  int port_ = 0;
};

// {host, address, ok, error}: a TCP connection to address:port within timeout_ms.
nlohmann::json connect_to(const std::string& host, const std::string& address, int port, int timeout_ms);

}  // namespace ddx::doctor
