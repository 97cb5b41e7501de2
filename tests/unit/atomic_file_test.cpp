// write_file_atomically (ddx/processes/atomic_file.h): the content lands whole under the name, and the
// temporary file it is written to first is hidden, so that a reader globbing the folder by the
// target's prefix (torchfrtrace on "nccl_trace_rank_*") never meets one a killed process left.
// The names created in the folder are watched with inotify while it writes.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ddx/processes/atomic_file.h"

namespace ddx {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(AtomicFile, TheTemporaryFileIsHiddenAndTheTargetAppearsWhole) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/ddx-atomic-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(::inotify_add_watch(watch, dir.c_str(), IN_CREATE | IN_MOVED_TO), 0);

  write_file_atomically(dir + "/nccl_trace_rank_1", "dump of rank 1");
  EXPECT_EQ(read_all(dir + "/nccl_trace_rank_1"), "dump of rank 1");

  std::vector<std::string> created, moved_to;
  alignas(inotify_event) char buffer[4096];
  for (ssize_t n; (n = ::read(watch, buffer, sizeof buffer)) > 0;) {
    for (char* at = buffer; at < buffer + n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(at);
      const std::string name = event->len > 0 ? event->name : "";
      if (event->mask & IN_CREATE) created.push_back(name);
      if (event->mask & IN_MOVED_TO) moved_to.push_back(name);
      at += sizeof(inotify_event) + event->len;
    }
  }
  ::close(watch);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].rfind(".nccl_trace_rank_1.tmp.", 0), 0u) << created[0];
  EXPECT_EQ(moved_to, std::vector<std::string>{"nccl_trace_rank_1"});
  // Nothing but the target is left.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.path().filename() == "nccl_trace_rank_1" ? 1 : 100;
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ddx
