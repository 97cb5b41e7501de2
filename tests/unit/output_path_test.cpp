// ddx/processes/output_path.h: an output path that cannot be written is refused up front, naming the flag,
// the path and why; a writable one passes, and the check itself leaves nothing behind.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"

namespace {

namespace fs = std::filesystem;

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ddx-output-path-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "a-file") << "x";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The message check_output_* threw, or "" when it passed.
  template <typename Check>
  static std::string refusal(Check check, const std::string& flag, const std::string& path) {
    try {
      check(flag, path);
    } catch (const ddx::UsageError& e) {
      return e.what();
    }
    return "";
  }
  std::string in_dir(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(OutputPath, WritablePathsPassAndNothingIsLeftBehind) {
  EXPECT_EQ(refusal(ddx::check_output_file, "--plot", in_dir("plot.svg")), "");
  EXPECT_EQ(refusal(ddx::check_output_file, "--plot", in_dir("a-file")), "");  // replaced, as asked
  EXPECT_EQ(refusal(ddx::check_output_file, "--plot", in_dir("new/deeper/plot.svg")), "");
  EXPECT_EQ(refusal(ddx::check_output_folder, "--out", in_dir("new/out")), "");
  EXPECT_EQ(refusal(ddx::check_output_folder, "--out", dir_.string()), "");
  EXPECT_EQ(refusal(ddx::check_output_file, "--plot", ""), "");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1) << "only a-file: no probe file, no folder created";
}

TEST_F(OutputPath, AFileWhereAFolderMustBeIsNamed) {
  const std::string file = in_dir("a-file");
  EXPECT_EQ(refusal(ddx::check_output_folder, "--out", file),
            "--out " + file + " cannot be written: " + file + " is a file, not a folder");
  EXPECT_EQ(refusal(ddx::check_output_file, "--plot", file + "/sub/plot.svg"),
            "--plot " + file + "/sub/plot.svg cannot be written: " + file + " is a file, not a folder");
  EXPECT_EQ(refusal(ddx::check_output_file, "--plot", dir_.string()),
            "--plot " + dir_.string() + " cannot be written: it is a folder");
}

// /proc takes no new files, even from root, for whom access(2) says it does.
TEST_F(OutputPath, AFolderThatTakesNoFilesIsNamed) {
  const std::string why = refusal(ddx::check_output_folder, "--out", "/proc/nope");
  EXPECT_EQ(why.rfind("--out /proc/nope cannot be written: /proc does not take new files (", 0), 0u) << why;
  EXPECT_NE(refusal(ddx::check_output_file, "--plot", "/proc/nope/plot.svg"), "");
}

}  // namespace
