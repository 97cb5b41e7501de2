#pragma once
// XID events: the NVIDIA driver's error reports in the kernel log ("NVRM: Xid (PCI:0000:3b:00):
// 79, pid=..., GPU has fallen off the bus."). NVML keeps no history of them, so ddx reads the
// kernel ring buffer (root, or kernel.dmesg_restrict=0) and counts them per GPU and code.
#include <map>
#include <string>
#include <vector>

namespace ddx::gpu {

// The kernel log since boot, one line per message; `readable` false (and no lines) when the
// kernel refuses it.
std::vector<std::string> read_kernel_log(bool& readable);

// Counts of each XID code in `lines` for the GPU at `pci_bus_id` ("00000000:3B:00.0"; the log
// writes "0000:3b:00", compared without case and the extra domain digits).
std::map<int, int> xids_for(const std::vector<std::string>& lines, const std::string& pci_bus_id);

// Every device the XIDs in `lines` name, as the log writes it ("0000:3b:00"), each once.
std::vector<std::string> xid_devices(const std::vector<std::string>& lines);

// Whether two ways of writing a PCI address ("00000000:3B:00.0", "0000:3b:00") name one device.
bool same_pci_device(const std::string& a, const std::string& b);

// What an XID code means, for the ones that mark hardware trouble; "" for others.
std::string xid_meaning(int code);

}  // namespace ddx::gpu
