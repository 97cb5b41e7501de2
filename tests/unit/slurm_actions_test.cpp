// `ddx health --slurm-drain / --slurm-resume` (probes/health/slurm_actions.h) against a fake
// scontrol on PATH that prints a planted node line and records every call: drains only on
// CRITICAL, never over an operator's drain, resumes only its own. The real SLURM cluster runs
// the same through `ddx health` in tests/dist/health_slurm_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "fake_scontrol/fake_scontrol.h"
#include "health/slurm_actions.h"

namespace ddx::health {
namespace {

class FakeScontrol : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ddx-scontrol-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    fake_ = std::make_unique<testing::FakeScontrolOnPath>(dir_.string());
  }
  void TearDown() override {
    fake_.reset();
    std::filesystem::remove_all(dir_);
  }
  void write(const std::string& name, const std::string& text) { fake_->write(name, text); }
  void plant(const std::string& state, const std::string& reason) { fake_->plant("node-b", state, reason); }
  std::vector<std::string> calls() const { return fake_->calls(); }
  std::filesystem::path dir_;
  std::unique_ptr<testing::FakeScontrolOnPath> fake_;
};

Report report_with(State state, const std::string& reason = "gpu3 uncorrectable ECC") {
  Report r;
  r.host = "node-b";
  Check c;
  c.name = "gpu3 ecc";
  c.state = state;
  c.reason = reason;
  r.checks.push_back(c);
  return r;
}

TEST_F(FakeScontrol, CriticalDrainsAnInServiceNodeWithDdxsReason) {
  const SlurmAction a = drain_if_critical(report_with(State::Critical), "node-b");
  EXPECT_TRUE(a.acted) << a.line;
  EXPECT_FALSE(a.failed);
  EXPECT_EQ(a.line, "slurm: drained node-b: ddx: gpu3 uncorrectable ECC");
  EXPECT_EQ(calls(), (std::vector<std::string>{"show node node-b -o",
                                               "update nodename=node-b state=drain reason=ddx: gpu3 uncorrectable ECC"}));
}

TEST_F(FakeScontrol, OkWarnAndUnknownNeverDrainNorAskSlurm) {
  for (State s : {State::Ok, State::Warn, State::Unknown}) {
    const SlurmAction a = drain_if_critical(report_with(s), "node-b");
    EXPECT_FALSE(a.acted);
    EXPECT_FALSE(a.failed);
    EXPECT_NE(a.line.find(std::string("not drained (") + to_string(s)), std::string::npos) << a.line;
  }
  EXPECT_TRUE(calls().empty());
  EXPECT_NE(drain_if_critical(report_with(State::Unknown), "node-b").line.find("never drains"), std::string::npos);
}

TEST_F(FakeScontrol, AnOperatorsDrainIsNeverOverwritten) {
  plant("IDLE+DRAIN", "maintenance: new PSU");
  const SlurmAction a = drain_if_critical(report_with(State::Critical), "node-b");
  EXPECT_FALSE(a.acted);
  EXPECT_FALSE(a.failed);
  EXPECT_EQ(a.line, "slurm: node-b left as it is (IDLE+DRAIN, reason \"maintenance: new PSU\" is not ddx's); "
                    "ddx would drain it for \"ddx: gpu3 uncorrectable ECC\"");
  EXPECT_EQ(calls(), (std::vector<std::string>{"show node node-b -o"}));
}

TEST_F(FakeScontrol, OwnDrainKeptWhenTheSameAndUpdatedWhenTheFaultsChanged) {
  plant("IDLE+DRAIN", "ddx: gpu3 uncorrectable ECC");
  SlurmAction a = drain_if_critical(report_with(State::Critical), "node-b");
  EXPECT_FALSE(a.acted);
  EXPECT_EQ(a.line, "slurm: node-b already drained: ddx: gpu3 uncorrectable ECC");
  plant("MIXED+DRAIN", "ddx: /scratch full");
  a = drain_if_critical(report_with(State::Critical), "node-b");
  EXPECT_TRUE(a.acted);
  EXPECT_EQ(calls().back(), "update nodename=node-b state=drain reason=ddx: gpu3 uncorrectable ECC");
}

TEST_F(FakeScontrol, ResumesOnlyItsOwnDrainAndOnlyWhenOkOrWarn) {
  plant("IDLE+DRAIN", "ddx: gpu3 uncorrectable ECC");
  for (State s : {State::Critical, State::Unknown}) {
    const SlurmAction a = resume_if_ours(report_with(s), "node-b");
    EXPECT_FALSE(a.acted);
    EXPECT_EQ(a.line, std::string("slurm: node-b not resumed (") + to_string(s) + ")");
  }
  EXPECT_TRUE(calls().empty());
  SlurmAction a = resume_if_ours(report_with(State::Warn), "node-b");
  EXPECT_TRUE(a.acted);
  EXPECT_EQ(a.line, "slurm: resumed node-b (was IDLE+DRAIN: ddx: gpu3 uncorrectable ECC)");
  EXPECT_EQ(calls().back(), "update nodename=node-b state=resume");

  plant("IDLE+DRAIN", "bad fan, ticket 42");
  const size_t before = calls().size();
  a = resume_if_ours(report_with(State::Ok), "node-b");
  EXPECT_FALSE(a.acted);
  EXPECT_FALSE(a.failed);
  EXPECT_EQ(a.line, "slurm: node-b stays IDLE+DRAIN: reason \"bad fan, ticket 42\" is not ddx's");
  EXPECT_EQ(calls().size(), before + 1);  // the show only

  plant("IDLE", "");
  a = resume_if_ours(report_with(State::Ok), "node-b");
  EXPECT_FALSE(a.acted);
  EXPECT_EQ(a.line, "slurm: node-b is in service (IDLE)");
}

TEST_F(FakeScontrol, ScontrolFailuresAreSaidAndMarkTheActionFailed) {
  write("show_exit", "1");
  write("node", "slurm_load_node error: Invalid node name specified\n");
  SlurmAction a = drain_if_critical(report_with(State::Critical), "node-x");
  EXPECT_TRUE(a.failed);
  EXPECT_FALSE(a.acted);
  EXPECT_EQ(a.line, "slurm: cannot drain node-x: scontrol show node node-x -o failed (exit 1): "
                    "slurm_load_node error: Invalid node name specified");
  write("show_exit", "0");
  plant("IDLE", "");
  write("update_exit", "1");
  a = drain_if_critical(report_with(State::Critical), "node-b");
  EXPECT_TRUE(a.failed);
  EXPECT_NE(a.line.find("cannot drain node-b: scontrol update nodename=node-b state=drain \"reason=ddx: gpu3 "
                        "uncorrectable ECC\" failed (exit 1)"), std::string::npos) << a.line;
}

TEST_F(FakeScontrol, NoScontrolOnPathIsAFailureNamingIt) {
  ::setenv("PATH", "/nonexistent", 1);
  const SlurmAction a = resume_if_ours(report_with(State::Ok), "node-b");
  EXPECT_TRUE(a.failed);
  EXPECT_EQ(a.line.rfind("slurm: cannot resume node-b: scontrol is not on PATH", 0), 0u) << a.line;
}

TEST(SlurmNodeName, SlurmdsNameElseTheShortHostname) {
  ::setenv("SLURMD_NODENAME", "gpu-017", 1);
  EXPECT_EQ(slurm_node_name(), "gpu-017");
  ::unsetenv("SLURMD_NODENAME");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string full = host;
  EXPECT_EQ(slurm_node_name(), full.substr(0, full.find('.')));
}

}  // namespace
}  // namespace ddx::health
