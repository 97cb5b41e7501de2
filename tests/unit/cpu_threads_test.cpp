// The CPU thread count a worker picks: the same whichever launcher started it, the user's
// explicit choice honoured, a launcher's blanket OMP_NUM_THREADS=1 not taken for one.
#include <gtest/gtest.h>

#include "ddx/rendezvous/cpu_threads.h"
#include "ddx/errors/errors.h"

namespace ddx {
namespace {

TEST(CpuThreads, CoresAreSharedAmongTheRanksOfTheNode) {
  EXPECT_EQ(choose_cpu_threads({}, 4, 16).count, 4);
  EXPECT_EQ(choose_cpu_threads({}, 3, 16).count, 5);
  EXPECT_EQ(choose_cpu_threads({}, 4, 2).count, 1);  // more ranks than cores: one each
  EXPECT_EQ(choose_cpu_threads({}, 1, 8).count, 8);
  EXPECT_EQ(choose_cpu_threads({}, 0, 8).count, 8);  // no local world known: a node of one
  EXPECT_EQ(choose_cpu_threads({}, 4, 16).reason, "16 cores / 4 ranks on this node");
}

TEST(CpuThreads, EveryLauncherGetsTheSameCount) {
  // srun sets no OMP_NUM_THREADS; ddx launch and torchrun set 1 for every worker.
  const EnvMap srun = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}};
  const EnvMap ddx_launch = {{"RANK", "1"}, {"DDX_LAUNCH", "1"}, {"OMP_NUM_THREADS", "1"},
                             {"DDX_OMP_NUM_THREADS_SET_BY", "ddx launch"}};
  const EnvMap torchrun = {{"RANK", "1"}, {"TORCHELASTIC_RUN_ID", "none"}, {"OMP_NUM_THREADS", "1"}};
  const EnvMap mpirun = {{"OMPI_COMM_WORLD_RANK", "1"}};
  for (const EnvMap& env : {srun, ddx_launch, torchrun, mpirun}) {
    EXPECT_EQ(choose_cpu_threads(env, 4, 16).count, 4);
    EXPECT_EQ(choose_cpu_threads(env, 4, 16).reason, "16 cores / 4 ranks on this node");
  }
}

TEST(CpuThreads, TheUsersChoiceWins) {
  EXPECT_EQ(choose_cpu_threads({{"OMP_NUM_THREADS", "3"}}, 4, 16).count, 3);
  EXPECT_EQ(choose_cpu_threads({{"OMP_NUM_THREADS", "3"}}, 4, 16).reason, "OMP_NUM_THREADS=3, set by the user");
  // Under torchrun a value other than its default 1 is the user's.
  EXPECT_EQ(choose_cpu_threads({{"OMP_NUM_THREADS", "2"}, {"TORCHELASTIC_RUN_ID", "x"}}, 4, 16).count, 2);
  // Outside a launcher, 1 is the user's too.
  EXPECT_EQ(choose_cpu_threads({{"OMP_NUM_THREADS", "1"}}, 4, 16).count, 1);
  // DDX_CPU_THREADS over everything, the launcher's mark included.
  EXPECT_EQ(choose_cpu_threads({{"DDX_CPU_THREADS", "6"}, {"OMP_NUM_THREADS", "3"}}, 4, 16).count, 6);
  EXPECT_EQ(choose_cpu_threads({{"DDX_CPU_THREADS", "2"}, {"OMP_NUM_THREADS", "1"},
                                {"DDX_OMP_NUM_THREADS_SET_BY", "ddx launch"}},
                               4, 16).count,
            2);
}

TEST(CpuThreads, ABadValueIsRefusedNamingTheVariable) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"OMP_NUM_THREADS", "0"}, {"OMP_NUM_THREADS", "four"}, {"DDX_CPU_THREADS", "-2"}, {"DDX_CPU_THREADS", ""}}) {
    try {
      choose_cpu_threads({{key, value}}, 1, 8);
      ADD_FAILURE() << key << "=" << value << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

TEST(CpuThreads, TheAffinityMaskHasAtLeastOneCore) { EXPECT_GE(cores_in_affinity_mask(), 1); }

}  // namespace
}  // namespace ddx
