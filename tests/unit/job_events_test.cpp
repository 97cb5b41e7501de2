// ddx/watchdog/job_events.h: records appended to $DDX_EVENTS_FILE, one parseable line each, shared by
// several processes; nothing at all without the variable.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddx/errors/errors.h"
#include "ddx/watchdog/job_event_records.h"
#include "ddx/watchdog/job_events.h"

namespace {

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

class JobEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ddx-job-events-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "events.jsonl").string();
  }
  void TearDown() override {
    ::unsetenv(ddx::events::kFileVariable);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(JobEvents, ARecordHasItsNameTimePidAndFields) {
  ::setenv(ddx::events::kFileVariable, path_.c_str(), 1);
  ddx::events::Event("nan_check.nonfinite").number("step", 13).ranks("ranks", {2, 3}).text("note", "a \"quoted\" text").real("ratio", 2.5).emit();
  const auto all = records(path_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].at("event"), "nan_check.nonfinite");
  EXPECT_EQ(all[0].at("step"), 13);
  EXPECT_EQ(all[0].at("ranks"), nlohmann::json({2, 3}));
  EXPECT_EQ(all[0].at("note"), "a \"quoted\" text");
  EXPECT_DOUBLE_EQ(all[0].at("ratio").get<double>(), 2.5);
  EXPECT_EQ(all[0].at("pid"), ::getpid());
  EXPECT_GT(all[0].at("unix_us").get<int64_t>(), 1700000000000000LL);
}

TEST_F(JobEvents, WithoutTheVariableNothingIsWritten) {
  ::unsetenv(ddx::events::kFileVariable);
  EXPECT_FALSE(ddx::events::enabled());
  ddx::events::Event("launch.started").number("workers", 2).emit();
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(JobEvents, ProcessesAppendToOneFileWithoutMixingLines) {
  ::setenv(ddx::events::kFileVariable, path_.c_str(), 1);
  constexpr int kProcesses = 4, kEach = 200;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kEach; ++i) ddx::events::Event("train.step").number("step", i).text("pad", std::string(300, 'x')).emit();
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(records(path_).size(), static_cast<size_t>(kProcesses * kEach));  // each line parses
}

// At a command's start the variable is checked: one UsageError naming it. A record that still
// cannot be written later (the folder removed mid-run) is a warning, never an exception.
TEST_F(JobEvents, AFileThatCannotBeWrittenIsAUsageErrorAtStartAndAWarningLater) {
  const std::string bad = (dir_ / "no-such-folder" / "events.jsonl").string();
  ::setenv(ddx::events::kFileVariable, bad.c_str(), 1);
  try {
    ddx::events::check_file_variable();
    ADD_FAILURE() << "no error for " << bad;
  } catch (const ddx::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "DDX_EVENTS_FILE=" + bad + " cannot be written: No such file or directory");
  }
  EXPECT_NO_THROW(ddx::events::Event("usage_error").text("message", "x").emit());
  EXPECT_FALSE(std::filesystem::exists(bad));
}

// An existing file is appended to, never truncated by the check; a new one in a writable folder passes.
TEST_F(JobEvents, TheCheckKeepsAnExistingFileAndAcceptsANewOne) {
  { std::ofstream(path_) << "{\"event\":\"earlier\",\"unix_us\":1,\"pid\":1}\n"; }
  ::setenv(ddx::events::kFileVariable, path_.c_str(), 1);
  EXPECT_NO_THROW(ddx::events::check_file_variable());
  ddx::events::Event("launch.started").emit();
  const auto all = records(path_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].at("event"), "earlier");
  const std::string fresh = (dir_ / "new.jsonl").string();
  ::setenv(ddx::events::kFileVariable, fresh.c_str(), 1);
  EXPECT_NO_THROW(ddx::events::check_file_variable());
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

// Reading a file back (ddx/watchdog/job_event_records.h, what the fault matrix and the SLURM tests read):
// in time order across the nodes' processes (a tie keeps the file's order), a record cut off by
// a crash and a line without an "event" left out, a missing file read as none.
TEST_F(JobEvents, ReadingBackOrdersByTimeAndLeavesOutCutOffRecords) {
  {
    std::ofstream out(path_);
    out << "{\"event\":\"train.resumed\",\"unix_us\":30,\"pid\":2,\"step\":5}\n"
        << "{\"event\":\"fault.fired\",\"unix_us\":10,\"pid\":1}\n"
        << "{\"event\":\"train.step\",\"unix_us\":30,\"pid\":2,\"step\":6}\n"
        << "{\"unix_us\":20,\"pid\":1}\n"
        << "{\"event\":\"launch.attempt_fa";
  }
  const auto read = ddx::events::read_records(path_);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[0].name, "fault.fired");
  EXPECT_EQ(read[0].unix_us, 10);
  EXPECT_EQ(read[1].name, "train.resumed");
  EXPECT_EQ(read[1].record.at("step"), 5);
  EXPECT_EQ(read[2].name, "train.step");
  EXPECT_TRUE(ddx::events::read_records((dir_ / "missing.jsonl").string()).empty());
}

}  // namespace
