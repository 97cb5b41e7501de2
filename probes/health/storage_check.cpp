#include "health/storage_check.h"

#include <dirent.h>
#include <signal.h>

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "ddx/checksum.h"
#include "ddx/text/text.h"
#include "ddx/text/clock_time.h"

namespace ddx::health {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = size_t{4} << 20;
constexpr size_t kBlock = 4096;
constexpr double kMiB = 1024.0 * 1024.0;

std::string errno_text() { return std::strerror(errno); }

// The test file goes away however the check ends.
class TestFile {
 public:
  explicit TestFile(std::string name) : name_(std::move(name)) {}
  ~TestFile() {
    if (fd_ >= 0) ::close(fd_);
    if (created_) ::unlink(name_.c_str());
  }
  const std::string& name() const { return name_; }
  bool create() {
    fd_ = ::open(name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    created_ = fd_ >= 0;
    return created_;
  }
  bool open_for_reading() {
    fd_ = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC);
    return fd_ >= 0;
  }
  bool close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0;
  }
  int fd() const { return fd_; }

 private:
  std::string name_;
  int fd_ = -1;
  bool created_ = false;
};

// Distinct data in every block of every chunk (no file system can deduplicate or compress it
// away): a fixed pseudo-random chunk with the chunk's and the block's number stamped in.
class ChunkData {
 public:
  ChunkData() : bytes_(kChunk) {
    uint64_t x = 0x73746f72616765ULL;
    for (size_t i = 0; i < bytes_.size(); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      bytes_[i] = static_cast<unsigned char>(x);
    }
  }
  const unsigned char* stamped(uint64_t chunk) {
    for (size_t block = 0; block < kChunk / kBlock; ++block) {
      const uint64_t stamp = chunk * (kChunk / kBlock) + block;
      std::memcpy(&bytes_[block * kBlock], &stamp, sizeof(stamp));
    }
    return bytes_.data();
  }

 private:
  std::vector<unsigned char> bytes_;
};

bool write_all(int fd, const unsigned char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

Check critical(Check c, const std::string& path, const std::string& what, const std::string& reason) {
  c.state = State::Critical;
  c.value = what;
  c.reason = "storage " + path + " " + reason;
  c.remediation = "check the file system and its device under " + path +
                  " (dmesg, mount, the disk's or storage system's own health) before jobs checkpoint there";
  return c;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Test files of this host's earlier runs that were killed before they could remove theirs (the
// example scripts' timeout kills a run): their process is gone, so they are only taking space.
void remove_files_of_killed_runs(const std::string& path) {
  const std::string prefix = ".ddx-health-" + host_name() + "-";
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 5 || name.substr(name.size() - 4) != ".tmp") continue;
    const std::string pid_text = name.substr(prefix.size(), name.size() - 4 - prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::atol(pid_text.c_str());
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink((path + "/" + name).c_str());
  }
  ::closedir(dir);
}

}  // namespace

Check storage_check(const std::string& path, double mib, const std::function<void(const std::string&)>& after_sync) {
  Check c;
  c.name = "storage " + path;
  remove_files_of_killed_runs(path);  // before the free space is judged: they are ddx's own
  const size_t bytes = std::max<size_t>(kBlock, static_cast<size_t>(std::llround(mib * kMiB)) / kBlock * kBlock);
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return critical(c, path, "cannot look at " + path + ": " + errno_text(), "unreachable");
  const double free_bytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  if (free_bytes < 2.0 * static_cast<double>(bytes)) {
    c.state = State::Warn;
    c.value = printf_text("only %.0f MiB free: the %.0f MiB write test was not run", free_bytes / kMiB, bytes / kMiB);
    c.remediation = "free space under " + path + " (level 1's row for it says how full it is)";
    c.reason = "storage " + path + " too full to test";
    return c;
  }

  TestFile file(path + "/.ddx-health-" + host_name() + "-" + std::to_string(::getpid()) + ".tmp");
  if (!file.create()) return critical(c, path, "cannot create a file in " + path + ": " + errno_text(), "not writable");
  ChunkData data;
  Fnv1a64 written;
  const auto write_start = Clock::now();
  for (size_t done = 0, chunk = 0; done < bytes; ++chunk) {
    const size_t size = std::min(kChunk, bytes - done);
    const unsigned char* chunk_bytes = data.stamped(chunk);
    if (!write_all(file.fd(), chunk_bytes, size)) {
      return critical(c, path, printf_text("write failed after %.0f MiB: ", done / kMiB) + errno_text(), "write failed");
    }
    written.update(chunk_bytes, size);
    done += size;
  }
  if (::fsync(file.fd()) != 0) return critical(c, path, "fsync failed: " + errno_text(), "fsync failed");
  const double write_s = seconds_since(write_start);
  // Read back what the device holds, not the page cache: the pages are clean after the fsync.
  ::posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
  if (!file.close()) return critical(c, path, "close after writing failed: " + errno_text(), "write failed");
  if (after_sync) after_sync(file.name());

  if (!file.open_for_reading()) return critical(c, path, "cannot open the test file again: " + errno_text(), "read failed");
  Fnv1a64 read_back;
  std::vector<unsigned char> buffer(kChunk);
  size_t read_bytes = 0;
  const auto read_start = Clock::now();
  for (;;) {
    const ssize_t n = ::read(file.fd(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return critical(c, path, printf_text("read failed after %.0f MiB: ", read_bytes / kMiB) + errno_text(), "read failed");
    if (n == 0) break;
    read_back.update(buffer.data(), static_cast<size_t>(n));
    read_bytes += static_cast<size_t>(n);
  }
  const double read_s = seconds_since(read_start);
  if (read_bytes != bytes || read_back.digest() != written.digest()) {
    return critical(c, path,
                    printf_text("read back %zu of %zu bytes, checksum %s where %s was written", read_bytes, bytes,
                                read_back.hex().c_str(), written.hex().c_str()),
                    "read back differs");
  }
  const double write_mbps = static_cast<double>(bytes) / 1e6 / write_s;
  const double read_mbps = static_cast<double>(bytes) / 1e6 / read_s;
  c.value = printf_text("%.0f MB/s write with fsync, %.0f MB/s read back, %.0f MiB verified", write_mbps, read_mbps,
                        bytes / kMiB);
  c.metrics.push_back({"ddx_health_storage_write_mbps", write_mbps, {{"path", path}}, true});
  c.metrics.push_back({"ddx_health_storage_read_mbps", read_mbps, {{"path", path}}, false});
  return c;
}

}  // namespace ddx::health
