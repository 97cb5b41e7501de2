#pragma once
// What `ddx health --slurm-drain` and `--slurm-resume` do to this node through scontrol. A node
// is drained only on CRITICAL, never on UNKNOWN (a fault of ddx itself fails open), and resumed
// only when its drain reason is ddx's own (health_check.h kDrainPrefix): a node an operator
// drained stays drained. No LibTorch.
#include <string>

#include "health/health_check.h"

namespace ddx::health {

struct SlurmAction {
  bool acted = false;   // scontrol changed the node
  std::string line;     // what was done or why not, one line for the console and the JSON
  bool failed = false;  // scontrol could not be run or refused: the run becomes UNKNOWN
};

// This node's SLURM name: SLURMD_NODENAME, else the short hostname.
std::string slurm_node_name();

SlurmAction drain_if_critical(const Report& report, const std::string& node);
SlurmAction resume_if_ours(const Report& report, const std::string& node);

}  // namespace ddx::health
