// The error handlers in a real crashing process: the process still dies of its signal, prints a
// symbolized trace naming the faulting function and leaves a readable error file.
#include <gtest/gtest.h>

#include <filesystem>

#include "ddx/errors/error_report.h"
#include "process_helpers.h"

namespace {

namespace fs = std::filesystem;
using ddx::testing::ChildProcess;
using namespace std::chrono_literals;

class ErrorHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ddx-error-handler-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the test worker with `args` as rank 5 of 8; returns its wait status.
  int run_worker(std::vector<std::string> args) {
    args.insert(args.begin(), DDX_TEST_WORKER);
    ChildProcess child(args, {{"TORCHELASTIC_ERROR_FILE", error_file()}, {"RANK", "5"},
                              {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}},
                       (dir_ / "output.txt").string());
    auto status = child.wait(30s);
    EXPECT_TRUE(status.has_value()) << "worker hung";
    output_ = child.output();
    return status.value_or(0);
  }
  std::string error_file() const { return (dir_ / "error.json").string(); }

  fs::path dir_;
  std::string output_;
};

TEST_F(ErrorHandlerTest, SegfaultDiesOfSigsegvAndNamesTheFunction) {
  int status = run_worker({"--segv"});
  ASSERT_TRUE(WIFSIGNALED(status)) << output_;
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  EXPECT_NE(output_.find("[rank 5/8"), std::string::npos) << output_;
  EXPECT_NE(output_.find("SIGSEGV"), std::string::npos) << output_;
  EXPECT_NE(output_.find("crash_with_null_write"), std::string::npos) << output_;

  auto summary = ddx::read_error_file(error_file());
  ASSERT_TRUE(summary.has_value()) << output_;
  EXPECT_EQ(summary->signal.value_or(""), "SIGSEGV");
  ASSERT_FALSE(summary->frames.empty());
  // The faulting function is on top: no handler, backward or trampoline frames above it.
  EXPECT_NE(summary->frames[0].function.find("crash_with_null_write"), std::string::npos)
      << summary->frames[0].function;
  EXPECT_NE(summary->frames[0].file.find("test_worker.cpp"), std::string::npos);
  EXPECT_GT(summary->frames[0].line, 0);
}

TEST_F(ErrorHandlerTest, UncaughtExceptionReportsTypeAndMessage) {
  int status = run_worker({"--throw", "disk on fire"});
  ASSERT_TRUE(WIFSIGNALED(status)) << output_;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  EXPECT_NE(output_.find("std::runtime_error: disk on fire"), std::string::npos) << output_;

  auto summary = ddx::read_error_file(error_file());
  ASSERT_TRUE(summary.has_value()) << output_;
  EXPECT_EQ(summary->message, "std::runtime_error: disk on fire");
  ASSERT_FALSE(summary->frames.empty());
  EXPECT_NE(summary->frames[0].function.find("throw_uncaught"), std::string::npos)
      << summary->frames[0].function;
  // Reported once, by the terminate handler, not again by the SIGABRT handler.
  size_t first = output_.find("F fatal:");
  EXPECT_EQ(output_.find("F fatal:", first + 1), std::string::npos) << output_;
}

TEST_F(ErrorHandlerTest, CleanExitWritesNothing) {
  int status = run_worker({"--exit", "0"});
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(error_file()));
}

}  // namespace
