// The fault grammar, its one parser and the injection point, without processes (the faults'
// effects on real jobs are tested in tests/dist/fault_injection_test.cpp).
#include <gtest/gtest.h>

#include "ddx/errors/errors.h"
#include "faults/faults.h"

namespace ddx::faults {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_list(text, "DDX_FAULT");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(FaultSpec, ParsesKindRankStepAndKeys) {
  auto specs = parse_list("kill@rank=1,step=13;slow-link@rank=2,op=send,ms=40;local-mean", "DDX_FAULT");
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].kind, "kill");
  EXPECT_EQ(specs[0].rank, 1);
  EXPECT_EQ(specs[0].step, 13);
  EXPECT_EQ(specs[0].attempt, 0);
  EXPECT_EQ(specs[1].text_param("op", "*"), "send");
  EXPECT_EQ(specs[1].int_param("ms", 0, 0, 100), 40);
  EXPECT_EQ(specs[2].rank, -1);  // every rank
  EXPECT_EQ(specs[2].step, -1);  // every step
  EXPECT_EQ(parse_spec("exit@attempt=all", "--fault").attempt, -1);
}

TEST(FaultSpec, BadInputIsOneLineNamingTheSpec) {
  const std::string unknown = error_of("explode@rank=1");
  EXPECT_EQ(unknown.rfind("DDX_FAULT 'explode@rank=1': unknown fault kind 'explode' (valid kinds: kill, segfault,", 0), 0u)
      << unknown;
  EXPECT_NE(unknown.find("corrupt-collective"), std::string::npos) << unknown;
  EXPECT_NE(error_of("kill@rank=x").find("rank='x' is not an integer"), std::string::npos);
  EXPECT_NE(error_of("kill@step=0").find("step=0 is outside 1.."), std::string::npos);
  EXPECT_NE(error_of("kill@ms=3").find("kill takes the keys rank, step, attempt, not 'ms'"), std::string::npos);
  EXPECT_NE(error_of("slow-link@rank=1").find("slow-link needs ms=N"), std::string::npos);
  EXPECT_NE(error_of("straggler@factor=0.5").find("factor 0.5 is outside [1, 1000]"), std::string::npos);
  EXPECT_NE(error_of("kill@rank").find("'rank' is not key=value"), std::string::npos);
  // The host-memory switch is strict: a malformed value must not silently mean "no limit".
  for (const char* bad : {"4e6", "4000000x", "", " 4000000", "0", "-1", "99999999999999999999"}) {
    EXPECT_NE(error_of(std::string("host-memory@bytes=") + bad).find("bytes="), std::string::npos) << bad;
  }
  EXPECT_EQ(parse_spec("host-memory@bytes=4000000", "DDX_FAULT").int_param("bytes", 0, 1, INT64_MAX), 4000000);
}

TEST(FaultInjection, RankWorldAndLastStepAreChecked) {
  reset_for_tests(parse_list("kill@rank=3,step=9", "--fault"), 0);
  EXPECT_NO_THROW(set_rank(0, 4, 9));
  try {
    set_rank(0, 3, 9);
    ADD_FAILURE() << "rank 3 accepted in a world of 3";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 is outside the world of 3 rank(s) (valid kinds: kill,"),
              std::string::npos) << e.what();
  }
  try {
    set_rank(0, 4, 8);
    ADD_FAILURE() << "step 9 accepted in a run of 8 steps";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("step 9 is past the run's last step 8"), std::string::npos) << e.what();
  }
}

TEST(FaultInjection, CollectiveFaultsActOnlyOnTheirRankStepAndOp) {
  reset_for_tests(parse_list("corrupt-collective@rank=1,op=all_gather,step=2;corrupt-collective@rank=0", "DDX_FAULT"), 1);
  EXPECT_TRUE(touches_collectives());
  EXPECT_FALSE(before_collective("all_gather").corrupt_result);  // step 0: before training
  reset_for_tests(parse_list("corrupt-collective@rank=1,op=all_gather,step=2", "DDX_FAULT"), 1);
  at_step(2);
  EXPECT_TRUE(before_collective("all_gather").corrupt_result);
  EXPECT_FALSE(before_collective("all_reduce").corrupt_result);
  at_step(3);
  EXPECT_FALSE(before_collective("all_gather").corrupt_result);
  // A probe's sendrecv: corruption is of the result it receives.
  reset_for_tests(parse_list("corrupt-collective@op=recv", "DDX_FAULT"), 0);
  EXPECT_TRUE(before_collective("send", "recv").corrupt_result);
  EXPECT_FALSE(before_collective("send").corrupt_result);
  // Another rank's fault does nothing here; a restarted attempt skips first-attempt faults.
  reset_for_tests(parse_list("corrupt-collective@rank=1", "DDX_FAULT"), 0);
  EXPECT_FALSE(touches_collectives());
  reset_for_tests(parse_list("corrupt-collective@rank=1", "DDX_FAULT"), 1, 1);
  EXPECT_FALSE(touches_collectives());
  reset_for_tests(parse_list("corrupt-collective@rank=1,attempt=all", "DDX_FAULT"), 1, 1);
  EXPECT_TRUE(touches_collectives());
}

TEST(FaultInjection, SkipAndMismatchActOnceOnTheFirstMatchingCollectiveOfTheStep) {
  // The kinds remember that they fired (one collective per process), so each case is a fresh kind
  // only in the sense of a fresh process: here one pass through each, in order.
  reset_for_tests(parse_list("skip-collective@rank=1,step=3,op=all_gather", "DDX_FAULT"), 1);
  EXPECT_TRUE(touches_collectives());
  at_step(2);
  EXPECT_FALSE(before_collective("all_gather").skip);  // not its step
  at_step(3);
  EXPECT_FALSE(before_collective("all_reduce").skip);  // not its op
  EXPECT_TRUE(before_collective("all_gather").skip);
  EXPECT_FALSE(before_collective("all_gather").skip);  // one collective only

  reset_for_tests(parse_list("mismatch@rank=0,step=1", "DDX_FAULT"), 0);
  at_step(1);
  EXPECT_FALSE(before_collective("all_gather").drop_last_element);
  EXPECT_TRUE(before_collective("all_reduce").drop_last_element);
  EXPECT_FALSE(before_collective("all_reduce").drop_last_element);
}

TEST(FaultInjection, NewKindsRefuseWhatTheyCannotDo) {
  EXPECT_THROW(parse_spec("mismatch@op=all_gather", "--fault"), UsageError);  // its input is not its output
  EXPECT_NO_THROW(parse_spec("shm-full@rank=1,step=3,path=/mnt/small", "--fault"));
  EXPECT_THROW(parse_spec("skip-collective@bytes=3", "--fault"), UsageError);  // a key it does not take
}

// The store lives in rank 0's process: a store-loss aimed elsewhere (or everywhere) is refused,
// and rank 0 without a store of its own to close (a single process) says so when it fires.
TEST(FaultInjection, StoreLossTargetsTheStoreHost) {
  EXPECT_NO_THROW(parse_spec("store-loss@rank=0,step=3", "--fault"));
  EXPECT_NE(error_of("store-loss@step=3").find("the rendezvous store is hosted by rank 0's process: give rank=0"),
            std::string::npos);
  EXPECT_NE(error_of("store-loss@rank=1,step=3").find("give rank=0"), std::string::npos);
  reset_for_tests(parse_list("store-loss@rank=0,step=2", "--fault"), 0);
  at_step(1);
  try {
    at_step(2);
    ADD_FAILURE() << "store-loss fired without a store to close";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("this process hosts no rendezvous store"), std::string::npos) << e.what();
  }
}

TEST(FaultInjection, ReportsAndLaunchLineNameEverySpec) {
  reset_for_tests({}, 0);
  EXPECT_TRUE(report_entry().empty());
  reset_for_tests(parse_list("local-mean;scale-grad@rank=1,factor=2", "DDX_FAULT"), 0);
  EXPECT_EQ(report_entry(), (std::vector<std::string>{"DDX_FAULT local-mean", "DDX_FAULT scale-grad@rank=1,factor=2"}));
  EXPECT_EQ(launch_note({}, {"ddx", "train"}), "");
  EXPECT_EQ(launch_note({{"DDX_FAULT", "hang@rank=1"}}, {"ddx", "train", "--fault", "kill@rank=0", "--fault=exit"}),
            "injected faults: DDX_FAULT=hang@rank=1; --fault kill@rank=0; --fault exit");
}

}  // namespace
}  // namespace ddx::faults
