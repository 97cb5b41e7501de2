// Log line format, levels, per-rank files and whole lines under concurrency.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "ddx/errors/errors.h"
#include "ddx/text/log.h"

namespace ddx {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Points fd 2 at a file for the lifetime of the object, so tests can read what was logged.
class StderrCapture {
 public:
  explicit StderrCapture(fs::path path) : path_(std::move(path)) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    std::FILE* file = std::fopen(path_.c_str(), "w");
    ::dup2(::fileno(file), STDERR_FILENO);
    std::fclose(file);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    return read_file(path_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  fs::path path_;
  int saved_ = -1;
};

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::reset();
    dir_ = fs::temp_directory_path() / ("ddx-log-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    log::reset();
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

const std::string kPid = std::to_string(::getpid());
const std::string kTime = R"(\d\d:\d\d:\d\d\.\d\d\d)";

TEST_F(LogTest, PrefixBeforeTheRankIsKnown) {
  StderrCapture capture(dir_ / "stderr");
  log::info("hello ", 42);
  EXPECT_TRUE(std::regex_match(capture.text(),
                               std::regex(R"(\[ddx [^ :\]]+:)" + kPid + R"(\] I )" + kTime + " hello 42\n")))
      << "unexpected line";
}

TEST_F(LogTest, PrefixCarriesRankAndWorld) {
  log::set_rank(3, 8);
  StderrCapture capture(dir_ / "stderr");
  log::warn("disk ", "slow");
  const std::string text = capture.text();
  EXPECT_TRUE(std::regex_match(text, std::regex(R"(\[rank 3/8 [^ :\]]+:)" + kPid + R"(\] W )" + kTime +
                                                " disk slow\n")))
      << text;
}

TEST_F(LogTest, LevelsFilterAndUseTheirLetters) {
  log::set_level(log::Level::Debug);
  EXPECT_EQ(log::level(), log::Level::Debug);
  {
    StderrCapture capture(dir_ / "all");
    log::debug("d");
    log::info("i");
    log::warn("w");
    log::error("e");
    const auto lines = lines_of(capture.text());
    ASSERT_EQ(lines.size(), 4u);
    const char letters[] = {'D', 'I', 'W', 'E'};
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(std::regex_match(lines[i], std::regex(R"(\[ddx \S+\] )" + std::string(1, letters[i]) + " " +
                                                        kTime + " " + std::string(1, std::tolower(letters[i])))))
          << lines[i];
    }
  }
  log::set_level(log::Level::Warn);
  StderrCapture capture(dir_ / "warn");
  log::debug("d");
  log::info("i");
  log::warn("w");
  log::error("e");
  const auto lines = lines_of(capture.text());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("] W "), std::string::npos);
  EXPECT_NE(lines[1].find("] E "), std::string::npos);
}

TEST_F(LogTest, ErrorIsNeverFiltered) {
  log::set_level(log::Level::Error);
  StderrCapture capture(dir_ / "stderr");
  log::warn("hidden");
  log::error("shown");
  const auto lines = lines_of(capture.text());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("shown"), std::string::npos);
}

TEST_F(LogTest, TrailingNewlineIsNotDoubled) {
  StderrCapture capture(dir_ / "stderr");
  log::info("one\n");
  const std::string text = capture.text();
  EXPECT_EQ(text.find("\n\n"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

TEST_F(LogTest, ParseLevel) {
  EXPECT_EQ(log::parse_level("X", "debug"), log::Level::Debug);
  EXPECT_EQ(log::parse_level("X", "INFO"), log::Level::Info);
  EXPECT_EQ(log::parse_level("X", "Warn"), log::Level::Warn);
  EXPECT_EQ(log::parse_level("X", "error"), log::Level::Error);
  try {
    log::parse_level("--log-level", "loud");
    FAIL() << "accepted 'loud'";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--log-level='loud' is not one of debug, info, warn, error");
  }
}

TEST_F(LogTest, SetFileAppendsEveryLine) {
  const fs::path file = dir_ / "out.log";
  { std::ofstream(file) << "earlier\n"; }
  log::set_file(file.string());
  StderrCapture capture(dir_ / "stderr");
  log::info("to both");
  const std::string on_stderr = capture.text();
  const auto lines = lines_of(read_file(file));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "earlier");
  EXPECT_EQ(lines[1] + "\n", on_stderr);
}

TEST_F(LogTest, SetFileThatCannotBeOpenedIsAUsageError) {
  const std::string path = (dir_ / "missing-dir" / "x.log").string();
  try {
    log::set_file(path);
    FAIL() << "opened " << path;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(LogTest, ConfigureFromEnvReadsTheLevel) {
  log::configure_from_env({{"DDX_LOG_LEVEL", "error"}});
  EXPECT_EQ(log::level(), log::Level::Error);
  try {
    log::configure_from_env({{"DDX_LOG_LEVEL", "verbose"}});
    FAIL() << "accepted DDX_LOG_LEVEL=verbose";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "DDX_LOG_LEVEL='verbose' is not one of debug, info, warn, error");
  }
}

TEST_F(LogTest, ConfigureFromEnvReadsTheRealEnvironment) {
  ASSERT_EQ(setenv("DDX_LOG_LEVEL", "debug", 1), 0);
  log::configure_from_env();
  unsetenv("DDX_LOG_LEVEL");
  EXPECT_EQ(log::level(), log::Level::Debug);
}

TEST_F(LogTest, LogDirAfterSetRankOpensTheRanksFile) {
  const fs::path logs = dir_ / "nested" / "logs";
  log::set_rank(2, 4);
  log::configure_from_env({{"DDX_LOG_DIR", logs.string()}});
  StderrCapture capture(dir_ / "stderr");
  log::info("in the file");
  capture.text();
  const std::string text = read_file(logs / "ddx-rank2.log");
  EXPECT_NE(text.find("[rank 2/4 "), std::string::npos) << text;
  EXPECT_NE(text.find("in the file"), std::string::npos) << text;
}

TEST_F(LogTest, LogDirBeforeSetRankWaitsForTheRank) {
  const fs::path logs = dir_ / "logs";
  log::configure_from_env({{"DDX_LOG_DIR", logs.string()}});
  EXPECT_TRUE(fs::is_directory(logs));
  StderrCapture capture(dir_ / "stderr");
  log::info("before");
  EXPECT_TRUE(fs::is_empty(logs));
  log::set_rank(5, 8);
  log::info("after");
  capture.text();
  const std::string text = read_file(logs / "ddx-rank5.log");
  EXPECT_EQ(text.find("before"), std::string::npos);
  EXPECT_NE(text.find("after"), std::string::npos);
}

TEST_F(LogTest, LogDirThatCannotBeCreatedNamesTheVariable) {
  { std::ofstream(dir_ / "a-file") << "x"; }
  const std::string bad = (dir_ / "a-file" / "logs").string();
  try {
    log::configure_from_env({{"DDX_LOG_DIR", bad}});
    FAIL() << "created " << bad;
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("DDX_LOG_DIR=" + bad, 0), 0u) << e.what();
  }
}

TEST_F(LogTest, ConcurrentLinesStayWhole) {
  log::set_rank(0, 1);
  log::set_file((dir_ / "out.log").string());
  StderrCapture capture(dir_ / "stderr");
  constexpr int kThreads = 8, kLines = 300;
  const std::string payload(200, 'x');
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &payload] {
      for (int i = 0; i < kLines; ++i) log::info("thread ", t, " line ", i, " ", payload);
    });
  }
  for (auto& thread : threads) thread.join();
  const std::regex whole(R"(\[rank 0/1 \S+\] I )" + kTime + R"( thread (\d) line (\d+) x{200})");
  for (const std::string& text : {capture.text(), read_file(dir_ / "out.log")}) {
    const auto lines = lines_of(text);
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * kLines));
    std::vector<int> next(kThreads, 0);
    for (const auto& line : lines) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(line, m, whole)) << line;
      const int t = std::stoi(m[1]);
      EXPECT_EQ(std::stoi(m[2]), next[t]++) << "lines of one thread out of order";
    }
  }
}

}  // namespace
}  // namespace ddx
