// harness/common/output_folder.h: a suite's --out holds only the current run's files. An earlier
// run's folder is moved aside whole (its files intact, never deleted); a file in its place, the
// current folder, or a folder that takes no files is one line naming --out.
#include <gtest/gtest.h>
#include <sys/time.h>
#include <unistd.h>

#include <ctime>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ddx/errors/errors.h"
#include "harness/common/output_folder.h"

namespace {

namespace fs = std::filesystem;

class OutputFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("output-folder-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string in_dir(const std::string& name) const { return (dir_ / name).string(); }
  static std::string text_of(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string refusal(const std::string& dir) {
    try {
      ddx::harness::fresh_output_folder("--out", dir);
    } catch (const ddx::UsageError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(OutputFolder, AnEarlierRunIsMovedAsideWholeAndTheFolderIsEmpty) {
  const std::string out = in_dir("report");
  EXPECT_EQ(ddx::harness::fresh_output_folder("--out", out), "");  // new: nothing to move
  EXPECT_TRUE(fs::is_directory(out));
  EXPECT_EQ(ddx::harness::fresh_output_folder("--out", out), "");  // empty: nothing to move
  std::ofstream(out + "/validate.json") << "last week\n";
  fs::create_directories(out + "/parity");
  std::ofstream(out + "/parity/report.json") << "{}\n";

  const std::string moved = ddx::harness::fresh_output_folder("--out", out + "/");
  EXPECT_EQ(moved.rfind(out + ".previous-", 0), 0u) << moved;
  EXPECT_EQ(moved.size(), out.size() + std::string(".previous-YYYYMMDD-HHMMSS").size()) << moved;
  EXPECT_EQ(text_of(moved + "/validate.json"), "last week\n");
  EXPECT_TRUE(fs::exists(moved + "/parity/report.json"));
  EXPECT_TRUE(fs::is_directory(out));
  EXPECT_TRUE(fs::is_empty(out));

  // A second earlier run whose folder last changed in the same second gets a name of its own.
  std::ofstream(out + "/validate.json") << "this week\n";
  fs::last_write_time(out, fs::last_write_time(moved));
  const std::string again = ddx::harness::fresh_output_folder("--out", out);
  EXPECT_EQ(again, moved + "-2");
  EXPECT_EQ(text_of(again + "/validate.json"), "this week\n");
  EXPECT_EQ(text_of(moved + "/validate.json"), "last week\n");
}

// The name says when the earlier run last wrote, not when it was moved: checking that the folder
// takes files must not make its last change "now".
TEST_F(OutputFolder, TheMovedFolderIsNamedForItsLastChange) {
  const std::string out = in_dir("report");
  fs::create_directories(out);
  std::ofstream(out + "/validate.json") << "{}\n";
  std::tm tm{};
  tm.tm_year = 2020 - 1900, tm.tm_mon = 0, tm.tm_mday = 2, tm.tm_hour = 3, tm.tm_min = 4, tm.tm_sec = 5;
  tm.tm_isdst = -1;
  const std::time_t then = std::mktime(&tm);
  const struct timeval times[2] = {{then, 0}, {then, 0}};
  ASSERT_EQ(::utimes(out.c_str(), times), 0);
  EXPECT_EQ(ddx::harness::fresh_output_folder("--out", out), out + ".previous-20200102-030405");
}

TEST_F(OutputFolder, WhatCannotBeMadeFreshIsOneLineNamingOut) {
  const std::string file = in_dir("a-file");
  std::ofstream(file) << "mine\n";
  EXPECT_EQ(refusal(file), "--out " + file + " cannot be written: " + file + " is a file, not a folder");
  EXPECT_EQ(text_of(file), "mine\n");
  EXPECT_EQ(refusal("/proc/nope").rfind("--out /proc/nope cannot be written: /proc does not take new files", 0), 0u);

  const fs::path here = fs::current_path();
  fs::current_path(dir_);
  const std::string dot = refusal(".");
  fs::current_path(here);
  EXPECT_EQ(dot, "--out . holds the current folder and an earlier run's files: name a folder of its own");
  EXPECT_TRUE(fs::exists(file)) << "the current folder was moved";
}

}  // namespace
