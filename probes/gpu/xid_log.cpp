#include "gpu/xid_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace ddx::gpu {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// "00000000:3B:00.0" -> "3b:00": bus and device, the part every log format agrees on.
std::string bus_and_device(const std::string& pci_bus_id) {
  std::string id = lower(pci_bus_id);
  if (const size_t dot = id.rfind('.'); dot != std::string::npos) id = id.substr(0, dot);
  const size_t last = id.rfind(':');
  if (last == std::string::npos || last == 0) return id;
  const size_t before = id.rfind(':', last - 1);
  return id.substr(before == std::string::npos ? 0 : before + 1);
}

// The device an XID line names ("0000:3b:00" in "NVRM: Xid (PCI:0000:3b:00): 79, ..."), and where
// its closing parenthesis is; false for other lines.
bool xid_device_of(const std::string& line, std::string& device, size_t& close) {
  static const std::string tag = "NVRM: Xid (PCI:";
  const size_t at = line.find(tag);
  if (at == std::string::npos) return false;
  const size_t open = at + tag.size();
  close = line.find(')', open);
  if (close == std::string::npos) return false;
  device = line.substr(open, close - open);
  return true;
}

}  // namespace

std::vector<std::string> read_kernel_log(bool& readable) {
  std::vector<std::string> lines;
  readable = false;
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return lines;
  readable = true;
  char record[8192];
  for (;;) {  // one record per read; EAGAIN at the end of the buffer
    const ssize_t n = ::read(fd, record, sizeof record - 1);
    if (n < 0 && errno == EPIPE) continue;  // overwritten while reading: go on with the next
    if (n <= 0) break;
    std::string line(record, static_cast<size_t>(n));
    if (const size_t semi = line.find(';'); semi != std::string::npos) line = line.substr(semi + 1);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    lines.push_back(line);
  }
  ::close(fd);
  return lines;
}

std::map<int, int> xids_for(const std::vector<std::string>& lines, const std::string& pci_bus_id) {
  std::map<int, int> counts;
  const std::string want = bus_and_device(pci_bus_id);
  for (const std::string& line : lines) {
    std::string device;
    size_t close = 0;
    if (!xid_device_of(line, device, close) || bus_and_device(device) != want) continue;
    const size_t colon = line.find(':', close);
    if (colon == std::string::npos) continue;
    char* end = nullptr;
    const long code = std::strtol(line.c_str() + colon + 1, &end, 10);
    if (end != line.c_str() + colon + 1) ++counts[static_cast<int>(code)];
  }
  return counts;
}

std::vector<std::string> xid_devices(const std::vector<std::string>& lines) {
  std::vector<std::string> devices;
  for (const std::string& line : lines) {
    std::string device;
    size_t close = 0;
    if (!xid_device_of(line, device, close)) continue;
    bool seen = false;
    for (const std::string& d : devices) seen = seen || same_pci_device(d, device);
    if (!seen) devices.push_back(device);
  }
  return devices;
}

bool same_pci_device(const std::string& a, const std::string& b) { return bus_and_device(a) == bus_and_device(b); }

std::string xid_meaning(int code) {
  switch (code) {
    case 48: return "double-bit ECC error";
    case 63: return "row remapping event (ECC page retirement)";
    case 64: return "row remapping failure";
    case 74: return "NVLink error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: return "GSP RPC timeout";
    case 120: return "GSP error";
    default: return "";
  }
}

}  // namespace ddx::gpu
