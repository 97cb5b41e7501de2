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
// numa_nodes, governor (null when no cpufreq), gpus, clock_offset_ms (set by the command).
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "ddx/env.h"
#include "ddx/rendezvous.h"

namespace ddx::doctor {

struct FactsInput {
  RendezvousInfo info;
  std::string save_dir = ".";                                       // where checkpoints go
  std::vector<std::pair<std::string, std::string>> versions;        // ddx, libtorch, nccl, mpi...
  int gpus = 0;                                                     // visible CUDA devices
  std::string shm_path = "/dev/shm";
  std::string sysfs_root = "/sys";                                  // NUMA, cpufreq, infiniband
};

nlohmann::json collect_facts(const EnvMap& env, const FactsInput& input);

}  // namespace ddx::doctor
