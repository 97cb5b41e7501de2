// Rendezvous resolution for every launcher ddx supports, flags on top, and every rejected input.
#include <gtest/gtest.h>

#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx {
namespace {

// The UsageError message resolve_rendezvous throws, or a test failure when it does not throw.
std::string usage_error(const EnvMap& env, const RendezvousFlags& flags = {}) {
  try {
    const RendezvousInfo info = resolve_rendezvous(env, flags);
    ADD_FAILURE() << "accepted: " << info.describe();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// Every error is one line and names what the user has to fix.
#define EXPECT_REJECTED(env_or_call, ...)                                                      \
  do {                                                                                         \
    const std::string message_ = usage_error(env_or_call);                                     \
    EXPECT_EQ(message_.find('\n'), std::string::npos) << message_;                             \
    for (const char* needle_ : {__VA_ARGS__}) {                                                \
      EXPECT_NE(message_.find(needle_), std::string::npos)                                     \
          << "message '" << message_ << "' lacks '" << needle_ << "'";                         \
    }                                                                                          \
  } while (0)

EnvMap torchrun_env() {
  return {{"RANK", "5"},          {"WORLD_SIZE", "8"},        {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"},     {"GROUP_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RESTART_COUNT", "2"},
          {"TORCHELASTIC_RUN_ID", "run-7"}};
}

EnvMap slurm_env() {
  return {{"SLURM_PROCID", "3"},          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", "1"},         {"SLURM_NODEID", "1"},
          {"SLURM_JOB_NODELIST", "gpu[001-004]"}, {"SLURM_TASKS_PER_NODE", "2(x4)"},
          {"SLURM_JOB_NUM_NODES", "4"},   {"SLURM_JOB_ID", "123456"},
          {"SLURM_STEP_ID", "0"}};
}

EnvMap with(EnvMap env, const EnvMap& changes) {
  for (const auto& [key, value] : changes) env[key] = value;
  return env;
}

EnvMap without(EnvMap env, std::initializer_list<const char*> keys) {
  for (const char* key : keys) env.erase(key);
  return env;
}

// ---- single process --------------------------------------------------------------------------

TEST(Rendezvous, NothingSetMeansOneProcess) {
  const RendezvousInfo info = resolve_rendezvous({});
  EXPECT_EQ(info.source, RendezvousSource::SingleProcess);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.node_rank, 0);
  EXPECT_EQ(info.num_nodes, 1);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 0);
  EXPECT_FALSE(info.mpi_bootstrap);
  EXPECT_FALSE(info.hostname.empty());
}

// ---- torchrun and ddx launch -----------------------------------------------------------------

TEST(Rendezvous, Torchrun) {
  const RendezvousInfo info = resolve_rendezvous(torchrun_env());
  EXPECT_EQ(info.source, RendezvousSource::Torchrun);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_EQ(info.master_addr, "node0");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(info.restart_count, 2);
  EXPECT_EQ(info.run_id, "run-7");
  EXPECT_FALSE(info.mpi_bootstrap);
}

TEST(Rendezvous, DdxLaunchIsTorchrunPlusItsMarker) {
  EXPECT_EQ(resolve_rendezvous(with(torchrun_env(), {{"DDX_LAUNCH", "1"}})).source,
            RendezvousSource::DdxLaunch);
  EXPECT_EQ(resolve_rendezvous(with(torchrun_env(), {{"DDX_LAUNCH", "0"}})).source,
            RendezvousSource::Torchrun);
}

TEST(Rendezvous, DdxLaunchMayAskRankZeroToPickThePortOfASingleProcess) {
  const RendezvousInfo info = resolve_rendezvous(
      {{"DDX_LAUNCH", "1"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "0"}});
  EXPECT_EQ(info.source, RendezvousSource::DdxLaunch);
  EXPECT_EQ(info.master_port, 0);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
}

TEST(Rendezvous, TorchrunWithoutLocalVariablesAssumesOneNode) {
  const RendezvousInfo info = resolve_rendezvous(
      {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(info.local_rank, 3);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.node_rank, 0);
  EXPECT_EQ(info.num_nodes, 1);
  EXPECT_EQ(info.restart_count, 0);
}

TEST(Rendezvous, TorchrunDerivesNodeRankAndCountFromLocalWorld) {
  const RendezvousInfo info = resolve_rendezvous(without(torchrun_env(), {"GROUP_RANK", "GROUP_WORLD_SIZE"}));
  EXPECT_EQ(info.node_rank, 1);  // 5 / 4
  EXPECT_EQ(info.num_nodes, 2);  // 8 / 4
}

TEST(Rendezvous, UnevenNodesUseGroupWorldSize) {
  const EnvMap env = with(torchrun_env(), {{"WORLD_SIZE", "6"}, {"GROUP_WORLD_SIZE", "3"}});
  EXPECT_EQ(resolve_rendezvous(env).num_nodes, 3);
  // Without GROUP_WORLD_SIZE: as many nodes as it takes to hold every rank.
  EXPECT_EQ(resolve_rendezvous(without(env, {"GROUP_WORLD_SIZE"})).num_nodes, 2);
}

TEST(Rendezvous, SingleRankTorchrunNeedsNoMaster) {
  const RendezvousInfo info = resolve_rendezvous({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(info.source, RendezvousSource::Torchrun);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 0);
}

TEST(Rendezvous, TorchrunInsideSlurmWins) {
  // `srun torchrun ...`: the agent's SLURM_PROCID stays in the worker's environment.
  const RendezvousInfo info = resolve_rendezvous(with(slurm_env(), torchrun_env()));
  EXPECT_EQ(info.source, RendezvousSource::Torchrun);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.master_port, 29500);
}

TEST(RendezvousErrors, TorchrunNonIntegers) {
  for (const char* key : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                          "GROUP_WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT"}) {
    const std::string expected = std::string(key) + "='x1' is not an integer";
    EXPECT_REJECTED(with(torchrun_env(), {{key, "x1"}}), expected.c_str());
  }
  EXPECT_REJECTED(with(torchrun_env(), {{"LOCAL_RANK", "1.5"}}), "LOCAL_RANK='1.5'");
}

TEST(RendezvousErrors, WorldBelowOne) {
  EXPECT_REJECTED(with(torchrun_env(), {{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE=0", "at least 1");
  EXPECT_REJECTED(with(torchrun_env(), {{"RANK", "0"}, {"WORLD_SIZE", "-2"}}), "WORLD_SIZE=-2");
}

TEST(RendezvousErrors, RankOutsideWorld) {
  EXPECT_REJECTED(with(torchrun_env(), {{"RANK", "8"}}), "RANK=8 is outside 0..7", "WORLD_SIZE");
  EXPECT_REJECTED(with(torchrun_env(), {{"RANK", "-1"}}), "RANK=-1");
}

TEST(RendezvousErrors, LocalRankOutsideLocalWorld) {
  EXPECT_REJECTED(with(torchrun_env(), {{"LOCAL_RANK", "4"}}), "LOCAL_RANK=4 is outside 0..3", "LOCAL_WORLD_SIZE");
  EXPECT_REJECTED(with(torchrun_env(), {{"LOCAL_RANK", "-1"}}), "LOCAL_RANK=-1");
}

TEST(RendezvousErrors, LocalWorldLargerThanWorld) {
  EXPECT_REJECTED(with(torchrun_env(), {{"LOCAL_WORLD_SIZE", "16"}}), "LOCAL_WORLD_SIZE=16", "WORLD_SIZE");
  EXPECT_REJECTED(with(torchrun_env(), {{"LOCAL_WORLD_SIZE", "0"}}), "LOCAL_WORLD_SIZE=0");
}

TEST(RendezvousErrors, NodeRankOutsideNodes) {
  EXPECT_REJECTED(with(torchrun_env(), {{"GROUP_RANK", "2"}}), "GROUP_RANK=2 is outside 0..1");
}

TEST(RendezvousErrors, PortOutsideRange) {
  EXPECT_REJECTED(with(torchrun_env(), {{"MASTER_PORT", "70000"}}), "MASTER_PORT=70000 is outside 1..65535");
  // torchrun always passes a real port: 0 there is a broken script, not a request.
  EXPECT_REJECTED(with(torchrun_env(), {{"MASTER_PORT", "0"}}), "MASTER_PORT=0 is outside 1..65535");
}

TEST(RendezvousErrors, PortZeroCannotReachOtherRanks) {
  EXPECT_REJECTED(with(torchrun_env(), {{"DDX_LAUNCH", "1"}, {"MASTER_PORT", "0"}}), "MASTER_PORT=0");
}

TEST(RendezvousErrors, MissingMasterForSeveralRanks) {
  EXPECT_REJECTED(without(torchrun_env(), {"MASTER_ADDR"}), "MASTER_ADDR");
  EXPECT_REJECTED(without(torchrun_env(), {"MASTER_PORT"}), "MASTER_PORT");
  EXPECT_REJECTED(with(torchrun_env(), {{"MASTER_ADDR", ""}}), "MASTER_ADDR is set but empty");
}

TEST(RendezvousErrors, RankWithoutWorldSize) {
  EXPECT_REJECTED((EnvMap{{"RANK", "0"}}), "RANK is set but WORLD_SIZE is not");
}

TEST(RendezvousErrors, NegativeRestartCount) {
  EXPECT_REJECTED(with(torchrun_env(), {{"TORCHELASTIC_RESTART_COUNT", "-1"}}), "TORCHELASTIC_RESTART_COUNT=-1");
}

// ---- Open MPI ------------------------------------------------------------------------------

EnvMap ompi_env() {
  return {{"OMPI_COMM_WORLD_RANK", "2"},       {"OMPI_COMM_WORLD_SIZE", "4"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
          {"OMPI_COMM_WORLD_NODE_RANK", "1"}};
}

TEST(Rendezvous, OpenMpiWithoutMasterAgreesOverMpi) {
  const RendezvousInfo info = resolve_rendezvous(ompi_env());
  EXPECT_EQ(info.source, RendezvousSource::OpenMpi);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_TRUE(info.mpi_bootstrap);
  EXPECT_EQ(info.master_port, 0);
  EXPECT_EQ(info.master_addr, "");
}

TEST(Rendezvous, OpenMpiUsesExportedMaster) {
  // mpirun -x MASTER_ADDR=h1 -x MASTER_PORT=5001, as in the guide.
  const RendezvousInfo info =
      resolve_rendezvous(with(ompi_env(), {{"MASTER_ADDR", "h1"}, {"MASTER_PORT", "5001"}}));
  EXPECT_FALSE(info.mpi_bootstrap);
  EXPECT_EQ(info.master_addr, "h1");
  EXPECT_EQ(info.master_port, 5001);
  // Half an endpoint is not enough: rank 0 supplies both.
  EXPECT_TRUE(resolve_rendezvous(with(ompi_env(), {{"MASTER_ADDR", "h1"}})).mpi_bootstrap);
}

TEST(Rendezvous, OpenMpiSingleRankNeedsNoBootstrap) {
  const RendezvousInfo info = resolve_rendezvous(
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_FALSE(info.mpi_bootstrap);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
}

TEST(Rendezvous, MpirunInsideSlurmWinsAndKeepsTheJobId) {
  const RendezvousInfo info = resolve_rendezvous(with(slurm_env(), ompi_env()));
  EXPECT_EQ(info.source, RendezvousSource::OpenMpi);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.run_id, "123456");
}

TEST(RendezvousErrors, OpenMpi) {
  EXPECT_REJECTED(without(ompi_env(), {"OMPI_COMM_WORLD_SIZE"}),
                  "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
  EXPECT_REJECTED(with(ompi_env(), {{"OMPI_COMM_WORLD_RANK", "4"}}), "OMPI_COMM_WORLD_RANK=4 is outside 0..3");
  EXPECT_REJECTED(with(ompi_env(), {{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}}), "OMPI_COMM_WORLD_LOCAL_RANK='x'");
  EXPECT_REJECTED(with(ompi_env(), {{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}), "OMPI_COMM_WORLD_LOCAL_RANK=2");
  EXPECT_REJECTED(with(ompi_env(), {{"OMPI_COMM_WORLD_NODE_RANK", "2"}}), "OMPI_COMM_WORLD_NODE_RANK=2");
  EXPECT_REJECTED(with(ompi_env(), {{"MASTER_ADDR", "h1"}, {"MASTER_PORT", "0"}}), "MASTER_PORT=0");
}

// ---- MPICH / Hydra -------------------------------------------------------------------------

EnvMap mpich_env() {
  return {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}};
}

TEST(Rendezvous, Mpich) {
  const RendezvousInfo info = resolve_rendezvous(mpich_env());
  EXPECT_EQ(info.source, RendezvousSource::Mpich);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_TRUE(info.mpi_bootstrap);
}

TEST(RendezvousErrors, Mpich) {
  EXPECT_REJECTED(with(mpich_env(), {{"PMI_SIZE", "abc"}}), "PMI_SIZE='abc'");
  EXPECT_REJECTED(with(mpich_env(), {{"PMI_RANK", "4"}}), "PMI_RANK=4");
  EXPECT_REJECTED(with(mpich_env(), {{"MPI_LOCALRANKID", "2"}}), "MPI_LOCALRANKID=2");
  EXPECT_REJECTED(with(mpich_env(), {{"MPI_LOCALNRANKS", "5"}}), "MPI_LOCALNRANKS=5", "PMI_SIZE");
  EXPECT_REJECTED(without(mpich_env(), {"PMI_SIZE"}), "PMI_RANK is set but PMI_SIZE is not");
}

// ---- SLURM ---------------------------------------------------------------------------------

TEST(Rendezvous, Slurm) {
  const RendezvousInfo info = resolve_rendezvous(slurm_env());
  EXPECT_EQ(info.source, RendezvousSource::Slurm);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.num_nodes, 4);
  EXPECT_EQ(info.master_addr, "gpu001");
  EXPECT_EQ(info.master_port, 8456);  // 5000 + 3456
  EXPECT_EQ(info.run_id, "123456");
  EXPECT_FALSE(info.mpi_bootstrap);
}

TEST(Rendezvous, SlurmUnevenTasksPerNode) {
  const RendezvousInfo info = resolve_rendezvous(
      with(slurm_env(), {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"}, {"SLURM_NODEID", "2"},
                         {"SLURM_LOCALID", "0"}, {"SLURM_JOB_NODELIST", "r[1-2]n[1-2]"},
                         {"SLURM_TASKS_PER_NODE", "3(x2),1(x2)"}}));
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.num_nodes, 4);
  EXPECT_EQ(info.node_rank, 2);
  EXPECT_EQ(info.master_addr, "r1n1");
}

TEST(Rendezvous, SlurmOlderVariableNames) {
  const RendezvousInfo info = resolve_rendezvous(
      {{"SLURM_PROCID", "1"}, {"SLURM_NPROCS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"},
       {"SLURM_NODELIST", "cpu[7,9]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}, {"SLURM_NNODES", "2"},
       {"SLURM_JOBID", "77"}, {"SLURM_STEPID", "0"}});
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.master_addr, "cpu7");
  EXPECT_EQ(info.master_port, 5077);
  EXPECT_EQ(info.run_id, "77");
}

TEST(Rendezvous, SlurmStepLayoutWinsOverTheJobs) {
  // srun on 2 of the job's 4 nodes: ranks count within the step.
  const RendezvousInfo info = resolve_rendezvous(with(
      slurm_env(), {{"SLURM_NTASKS", "4"}, {"SLURM_STEP_NODELIST", "gpu[003-004]"},
                    {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}}));
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_EQ(info.master_addr, "gpu003");
}

TEST(Rendezvous, SlurmExportedMasterWins) {
  const RendezvousInfo info =
      resolve_rendezvous(with(slurm_env(), {{"MASTER_ADDR", "login1"}, {"MASTER_PORT", "6000"}}));
  EXPECT_EQ(info.master_addr, "login1");
  EXPECT_EQ(info.master_port, 6000);
}

TEST(Rendezvous, SlurmWithoutNodeListCountsNodesFromTheirVariables) {
  const RendezvousInfo info = resolve_rendezvous(
      with(without(slurm_env(), {"SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES"}),
           {{"SLURM_NNODES", "4"}, {"MASTER_ADDR", "head"}}));
  EXPECT_EQ(info.num_nodes, 4);
  EXPECT_EQ(info.master_addr, "head");
}

TEST(Rendezvous, SlurmSingleTaskNeedsNoJobId) {
  const RendezvousInfo info =
      resolve_rendezvous({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_STEP_NUM_TASKS", "1"}});
  EXPECT_EQ(info.source, RendezvousSource::Slurm);
  EXPECT_EQ(info.master_port, 0);
}

// What sbatch gives the batch script itself (SLURM 22.05, -N 2 --ntasks-per-node 2): rank 0 of
// 4 by its variables, but no step. `ddx train` run there is one process; the ranks of the job
// are what srun starts.
TEST(Rendezvous, ACommandInTheBatchScriptItselfIsOneProcess) {
  const RendezvousInfo info = resolve_rendezvous(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"},
       {"SLURM_JOB_ID", "2"}, {"SLURM_JOB_NODELIST", "ddx-host-a,ddx-host-b"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}});
  EXPECT_EQ(info.source, RendezvousSource::SingleProcess);
  EXPECT_EQ(info.world_size, 1);
}

TEST(RendezvousErrors, SlurmInconsistent) {
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_PROCID", "8"}}), "SLURM_PROCID=8 is outside 0..7", "SLURM_NTASKS");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_NODEID", "4"}}), "SLURM_NODEID=4", "SLURM_TASKS_PER_NODE");
  EXPECT_REJECTED(without(with(slurm_env(), {{"SLURM_NODEID", "4"}}), {"SLURM_TASKS_PER_NODE"}),
                  "SLURM_NODEID=4 is outside 0..3", "SLURM_JOB_NODELIST=gpu[001-004]");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_LOCALID", "2"}}), "SLURM_LOCALID=2 is outside 0..1",
                  "SLURM_TASKS_PER_NODE=2(x4)");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_TASKS_PER_NODE", "16"}, {"SLURM_NODEID", "0"}}),
                  "SLURM_TASKS_PER_NODE=16", "SLURM_NTASKS");
}

TEST(RendezvousErrors, SlurmMalformed) {
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_PROCID", "one"}}), "SLURM_PROCID='one'");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_NTASKS", "8x"}}), "SLURM_NTASKS='8x'");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_LOCALID", ""}}), "SLURM_LOCALID=''");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_JOB_NODELIST", "gpu[001-004"}}), "SLURM_JOB_NODELIST", "'[' without ']'");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_JOB_NODELIST", "gpu[4-1]"}}), "SLURM_JOB_NODELIST", "reversed");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_TASKS_PER_NODE", "2(x4"}}), "SLURM_TASKS_PER_NODE");
  EXPECT_REJECTED(with(slurm_env(), {{"SLURM_JOB_ID", "12ab"}}), "SLURM_JOB_ID='12ab'");
  EXPECT_REJECTED(without(slurm_env(), {"SLURM_NTASKS"}), "SLURM_PROCID is set but SLURM_NTASKS is not");
}

TEST(RendezvousErrors, SlurmCannotFindMaster) {
  EXPECT_REJECTED(without(slurm_env(), {"SLURM_JOB_ID"}), "SLURM_JOB_ID", "MASTER_PORT");
  EXPECT_REJECTED(without(slurm_env(), {"SLURM_JOB_NODELIST"}), "SLURM_JOB_NODELIST", "MASTER_ADDR");
  EXPECT_REJECTED(with(slurm_env(), {{"MASTER_PORT", "65536"}}), "MASTER_PORT=65536");
}

// ---- flags ---------------------------------------------------------------------------------

TEST(Rendezvous, FlagsOverrideTheEnvironmentFieldByField) {
  RendezvousFlags flags;
  flags.rank = 6;
  flags.master_addr = "10.0.0.1";
  const RendezvousInfo info = resolve_rendezvous(torchrun_env(), flags);
  EXPECT_EQ(info.source, RendezvousSource::Flags);
  EXPECT_EQ(info.rank, 6);
  EXPECT_EQ(info.world_size, 8);         // from WORLD_SIZE
  EXPECT_EQ(info.local_world_size, 4);   // from LOCAL_WORLD_SIZE
  EXPECT_EQ(info.local_rank, 1);         // from LOCAL_RANK
  EXPECT_EQ(info.node_rank, 1);          // from GROUP_RANK
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 29500);    // from MASTER_PORT
}

TEST(RendezvousErrors, FlagsThatContradictTheEnvironment) {
  RendezvousFlags flags;
  flags.world_size = 4;  // with LOCAL_WORLD_SIZE=4: one node, yet GROUP_RANK=1
  const std::string message = usage_error(with(torchrun_env(), {{"RANK", "1"}}), flags);
  EXPECT_NE(message.find("GROUP_RANK=1 is outside 0..0"), std::string::npos) << message;
}

TEST(Rendezvous, FlagsWithoutRankKeepTheLauncherAsSource) {
  RendezvousFlags flags;
  flags.master_port = 12345;
  flags.local_rank = 0;
  const RendezvousInfo info = resolve_rendezvous(slurm_env(), flags);
  EXPECT_EQ(info.source, RendezvousSource::Slurm);
  EXPECT_EQ(info.master_port, 12345);
  EXPECT_EQ(info.local_rank, 0);        // instead of SLURM_LOCALID=1
  EXPECT_EQ(info.master_addr, "gpu001");  // still from the node list
}

TEST(Rendezvous, FlagsAlone) {
  RendezvousFlags flags;
  flags.rank = 1;
  flags.world_size = 2;
  flags.local_rank = 0;
  flags.local_world_size = 1;
  flags.master_addr = "head";
  flags.master_port = 29400;
  const RendezvousInfo info = resolve_rendezvous({}, flags);
  EXPECT_EQ(info.source, RendezvousSource::Flags);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_EQ(info.master_addr, "head");
  EXPECT_EQ(info.master_port, 29400);
}

TEST(Rendezvous, FlagsTakeTheEndpointFromMasterVariables) {
  RendezvousFlags flags;
  flags.rank = 0;
  flags.world_size = 2;
  const RendezvousInfo info = resolve_rendezvous({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "7000"}}, flags);
  EXPECT_EQ(info.master_addr, "h");
  EXPECT_EQ(info.master_port, 7000);
}

TEST(Rendezvous, FlagPortZeroMeansPickForOneProcessAndBootstrapUnderMpi) {
  RendezvousFlags flags;
  flags.master_port = 0;
  EXPECT_EQ(resolve_rendezvous({}, flags).master_port, 0);
  const RendezvousInfo mpi =
      resolve_rendezvous(with(ompi_env(), {{"MASTER_ADDR", "h1"}, {"MASTER_PORT", "5001"}}), flags);
  EXPECT_TRUE(mpi.mpi_bootstrap);
}

RendezvousFlags flags_of(std::optional<int> rank, std::optional<int> world,
                         std::optional<int> local_rank = {}, std::optional<int> local_world = {},
                         std::optional<int> port = 29500) {
  RendezvousFlags f;
  f.rank = rank;
  f.world_size = world;
  f.local_rank = local_rank;
  f.local_world_size = local_world;
  f.master_addr = "h";
  f.master_port = port;
  return f;
}

std::string flag_error(const RendezvousFlags& flags) { return usage_error({}, flags); }

TEST(RendezvousErrors, BadFlags) {
  EXPECT_NE(flag_error(flags_of(2, 2)).find("--rank=2 is outside 0..1"), std::string::npos);
  EXPECT_NE(flag_error(flags_of(-1, 2)).find("--rank=-1"), std::string::npos);
  EXPECT_NE(flag_error(flags_of(0, 0)).find("--world-size=0"), std::string::npos);
  EXPECT_NE(flag_error(flags_of(0, 2, 0, 4)).find("--local-world-size=4 is larger than world size 2 from --world-size"),
            std::string::npos);
  EXPECT_NE(flag_error(flags_of(0, 2, 2, 2)).find("--local-rank=2 is outside 0..1"), std::string::npos);
  EXPECT_NE(flag_error(flags_of(0, 1, {}, {}, 70000)).find("--master-port=70000 is outside 0..65535"),
            std::string::npos);
  EXPECT_NE(flag_error(flags_of(0, 2, {}, {}, 0)).find("--master-port=0"), std::string::npos);
  // --rank beyond the default world of 1.
  RendezvousFlags rank_only;
  rank_only.rank = 1;
  EXPECT_NE(flag_error(rank_only).find("--rank=1 is outside 0..0"), std::string::npos);
  RendezvousFlags no_master;
  no_master.rank = 0;
  no_master.world_size = 2;
  EXPECT_NE(flag_error(no_master).find("--master-addr"), std::string::npos);
  no_master.master_addr = "h";
  EXPECT_NE(flag_error(no_master).find("--master-port"), std::string::npos);
  no_master.master_addr = "";
  EXPECT_NE(flag_error(no_master).find("--master-addr is empty"), std::string::npos);
}

// ---- describe ------------------------------------------------------------------------------

TEST(Rendezvous, DescribeIsOneReadableLine) {
  EXPECT_EQ(resolve_rendezvous(slurm_env()).describe(),
            "rank 3/8 (local 1/2, node 1/4) via SLURM, master gpu001:8456");
  EXPECT_EQ(resolve_rendezvous({}).describe(),
            "rank 0/1 (local 0/1, node 0/1) via single process, master 127.0.0.1:<any free port>");
  EXPECT_EQ(resolve_rendezvous(ompi_env()).describe(),
            "rank 2/4 (local 0/2, node 1/2) via Open MPI, master agreed over MPI");
}

TEST(Rendezvous, SourceNames) {
  EXPECT_STREQ(to_string(RendezvousSource::Flags), "flags");
  EXPECT_STREQ(to_string(RendezvousSource::DdxLaunch), "ddx launch");
  EXPECT_STREQ(to_string(RendezvousSource::Torchrun), "torchrun");
  EXPECT_STREQ(to_string(RendezvousSource::OpenMpi), "Open MPI");
  EXPECT_STREQ(to_string(RendezvousSource::Mpich), "MPICH");
  EXPECT_STREQ(to_string(RendezvousSource::Slurm), "SLURM");
  EXPECT_STREQ(to_string(RendezvousSource::SingleProcess), "single process");
}

}  // namespace
}  // namespace ddx
