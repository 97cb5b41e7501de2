// `srun ddx launch` / `srun ddx fault matrix`: the nodes a per-node task takes from its SLURM
// step (ddx/rendezvous/rendezvous.h, slurm_step_nodes). The variables are those srun 22.05 set for
// `srun -N 2 --ntasks-per-node 1` in the two-host cluster of tests/dist/slurm_cluster.h; the
// end-to-end runs are in tests/dist/slurm_test.cpp.
#include <gtest/gtest.h>

#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx {
namespace {

EnvMap step_task(int node, const std::string& tasks_per_node = "1(x2)") {
  return {{"SLURM_JOB_ID", "123457"},           {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(node)}, {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", std::to_string(node)}, {"SLURM_NTASKS", "2"},
          {"SLURM_STEP_NUM_TASKS", "2"},          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_STEP_NODELIST", "node[07-08]"}, {"SLURM_JOB_NODELIST", "node[07-08]"},
          {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node}};
}

TEST(SlurmStepNodes, EachTaskTakesItsNodeAndTheMasterFromTheStep) {
  for (int node : {0, 1}) {
    const auto nodes = slurm_step_nodes(step_task(node), "ddx launch");
    ASSERT_TRUE(nodes);
    EXPECT_EQ(nodes->nnodes, 2);
    EXPECT_EQ(nodes->node_rank, node);
    EXPECT_EQ(nodes->master_addr, "node07");
    EXPECT_EQ(nodes->master_port, slurm_master_port("123457"));  // the port srun-started ranks use
    EXPECT_EQ(nodes->said, "ddx launch: node " + std::to_string(node) + " of 2 of SLURM step 123457.0, master node07:" +
                               std::to_string(nodes->master_port) + " (from the step's node list and job id)");
  }
}

TEST(SlurmStepNodes, TwoTasksOnANodeAreRefusedNamingTheVariable) {
  try {
    slurm_step_nodes(step_task(0, "2(x2)"), "ddx launch");
    FAIL() << "accepted two launchers per node";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "ddx launch: SLURM_STEP_TASKS_PER_NODE=2(x2) starts 2 of it on node 0; start one per node "
                 "(srun --ntasks-per-node 1), it starts the node's ranks itself");
  }
}

TEST(SlurmStepNodes, ABatchScriptAWorkerOrOneNodeIsLeftAlone) {
  EnvMap batch = step_task(0);
  batch.erase("SLURM_STEP_NUM_TASKS");  // sbatch's shell: no step of its own
  EnvMap worker = step_task(1);
  worker["TORCHELASTIC_RUN_ID"] = "ddx-node07-15457";
  const EnvMap one_node = {{"SLURM_JOB_ID", "9"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"},
                           {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_STEP_NODELIST", "node07"},
                           {"SLURM_STEP_TASKS_PER_NODE", "1"}};
  for (const EnvMap& env : {batch, worker, one_node}) EXPECT_FALSE(slurm_step_nodes(env, "ddx launch"));
}

TEST(SlurmStepNodes, ANodeListThatDoesNotParseIsNamed) {
  EnvMap env = step_task(0);
  env["SLURM_STEP_NODELIST"] = "node[07-";
  try {
    slurm_step_nodes(env, "ddx fault matrix");
    FAIL() << "accepted a broken node list";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("SLURM_STEP_NODELIST: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace ddx
