// Error files: what ddx writes reads back; torchelastic's own files read too; junk is nullopt.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ddx/errors/error_report.h"
#include "ddx/errors/verdict.h"

namespace {

namespace fs = std::filesystem;

class ErrorFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ddx-error-report-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    ::unsetenv("TORCHELASTIC_ERROR_FILE");
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
  }
  fs::path dir_;
};

// The watchdog reports a collective stuck on another thread: its own stack would mislead, so
// the report carries none (the launcher's table then shows the message only).
TEST_F(ErrorFileTest, ReportWithoutStackHasNoFrames) {
  std::string file = path("error.json");
  ::setenv("TORCHELASTIC_ERROR_FILE", file.c_str(), 1);
  ddx::write_error_report("ddx watchdog: all_reduce #5 on group world timed out after 3 s", 9, /*with_stack=*/false);
  auto summary = ddx::read_error_file(file);
  ::unsetenv("TORCHELASTIC_ERROR_FILE");
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->message, "ddx watchdog: all_reduce #5 on group world timed out after 3 s");
  EXPECT_TRUE(summary->frames.empty());
}

TEST_F(ErrorFileTest, WriteErrorReportRoundTrips) {
  std::string file = path("error.json");
  ::setenv("TORCHELASTIC_ERROR_FILE", file.c_str(), 1);
  ddx::set_error_report_rank(3, 1, 8);
  ddx::write_error_report("CollectiveTimeout: all_reduce on rank 3 took > 30 s\nsecond line", 7);

  auto summary = ddx::read_error_file(file);
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->message, "CollectiveTimeout: all_reduce on rank 3 took > 30 s");
  EXPECT_FALSE(summary->signal.has_value());
  EXPECT_EQ(summary->pid, static_cast<int>(::getpid()));
  EXPECT_FALSE(summary->host.empty());
  ASSERT_FALSE(summary->frames.empty());
  // The top frame is the caller (this test), not the reporting machinery.
  EXPECT_NE(summary->frames[0].function.find("WriteErrorReportRoundTrips"), std::string::npos)
      << summary->frames[0].function;

  // The raw file is torchelastic's schema with ddx's details under extraInfo.ddx.
  std::ifstream in(file);
  nlohmann::json doc = nlohmann::json::parse(in);
  const auto& extra = doc["message"]["extraInfo"];
  EXPECT_TRUE(extra["py_callstack"].is_string());
  EXPECT_TRUE(extra["timestamp"].is_string());
  EXPECT_EQ(extra["ddx"]["rank"], 3);
  EXPECT_EQ(extra["ddx"]["local_rank"], 1);
  EXPECT_EQ(extra["ddx"]["world_size"], 8);
  EXPECT_EQ(extra["ddx"]["exit_code"], 7);
  EXPECT_TRUE(extra["ddx"]["signal"].is_null());
  // No temporary file is left next to it.
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) { (void)entry; ++entries; }
  EXPECT_EQ(entries, 1);
}

TEST_F(ErrorFileTest, ReadsTorchelasticRecordFile) {
  write("te.json", R"({"message": {"message": "RuntimeError: CUDA error: out of memory",
    "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"/w/train.py\", line 40, in main\n    step()\n  File \"/w/train.py\", line 12, in step\n    x.cuda()\nRuntimeError: CUDA error: out of memory\n",
    "timestamp": "1717000000"}}})");
  auto summary = ddx::read_error_file(path("te.json"));
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->message, "RuntimeError: CUDA error: out of memory");
  EXPECT_FALSE(summary->signal.has_value());
  ASSERT_EQ(summary->frames.size(), 2u);
  EXPECT_EQ(summary->frames[0].function, "step");  // innermost first
  EXPECT_EQ(summary->frames[0].file, "/w/train.py");
  EXPECT_EQ(summary->frames[0].line, 12);
  EXPECT_EQ(summary->frames[1].function, "main");
}

TEST_F(ErrorFileTest, ReadsPlainStringMessageAndSignalWording) {
  write("plain.json", R"({"message": "Signal 6 (SIGABRT) received by PID 4242\nmore"})");
  auto summary = ddx::read_error_file(path("plain.json"));
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->message, "Signal 6 (SIGABRT) received by PID 4242");
  ASSERT_TRUE(summary->signal.has_value());
  EXPECT_EQ(*summary->signal, "SIGABRT");
  EXPECT_TRUE(summary->frames.empty());
}

TEST_F(ErrorFileTest, MissingEmptyOrGarbageIsNullopt) {
  EXPECT_FALSE(ddx::read_error_file(path("does-not-exist.json")).has_value());
  write("empty.json", "");
  EXPECT_FALSE(ddx::read_error_file(path("empty.json")).has_value());
  write("garbage.json", "Segmentation fault (core dumped)\n");
  EXPECT_FALSE(ddx::read_error_file(path("garbage.json")).has_value());
  write("truncated.json", R"({"message": {"message": "half)");
  EXPECT_FALSE(ddx::read_error_file(path("truncated.json")).has_value());
  write("other.json", R"({"status": "ok"})");
  EXPECT_FALSE(ddx::read_error_file(path("other.json")).has_value());
  write("array.json", R"([1, 2])");
  EXPECT_FALSE(ddx::read_error_file(path("array.json")).has_value());
}

TEST(SignalName, KnownAndUnknown) {
  EXPECT_EQ(ddx::signal_name(11), "SIGSEGV");
  EXPECT_EQ(ddx::signal_name(6), "SIGABRT");
  EXPECT_EQ(ddx::signal_name(15), "SIGTERM");
  EXPECT_EQ(ddx::signal_name(9), "SIGKILL");
  EXPECT_EQ(ddx::signal_name(77), "signal 77");
}

// A verdict (ddx/errors/verdict.h) reads back as one, and as an error file a launcher can show; a
// report of an error is not a verdict, nor is junk.
TEST_F(ErrorFileTest, AVerdictReadsBackAsAVerdictAndAnErrorIsNone) {
  const std::string file = path("error.json");
  ::setenv("TORCHELASTIC_ERROR_FILE", file.c_str(), 1);
  ddx::write_verdict_report("compute: 2 ranks x 2 metrics, 14 trials: SLOW: rank 1 (vm, local rank 1)", 3);
  auto verdict = ddx::read_verdict_report(file);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->exit_code, 3);
  EXPECT_EQ(verdict->message, "compute: 2 ranks x 2 metrics, 14 trials: SLOW: rank 1 (vm, local rank 1)");
  auto summary = ddx::read_error_file(file);
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->message, verdict->message);
  EXPECT_TRUE(summary->frames.empty());

  ddx::write_error_report("CollectiveTimeout: all_reduce took > 30 s", 3, /*with_stack=*/false);
  ::unsetenv("TORCHELASTIC_ERROR_FILE");
  EXPECT_FALSE(ddx::read_verdict_report(file).has_value());
  write("junk.json", R"({"message": "text", "extraInfo": {"ddx": {"verdict": true}}})");
  EXPECT_FALSE(ddx::read_verdict_report(path("junk.json")).has_value());
  write("no-code.json", R"({"message": {"message": "m", "extraInfo": {"ddx": {"verdict": true, "message": "m"}}}})");
  EXPECT_FALSE(ddx::read_verdict_report(path("no-code.json")).has_value());
  EXPECT_FALSE(ddx::read_verdict_report(path("missing.json")).has_value());
}

}  // namespace
