#include "health/level1_kernel_log.h"

#include <cstdlib>
#include <map>
#include <regex>

#include "ddx/text/text.h"
#include "gpu/xid_log.h"
#include "health/level1_rows.h"

namespace ddx::health {
namespace {

// The whitelist: XIDs NVIDIA's XID catalogue resolves by restarting the application
// (RESTART_APP), which a faulty program causes on a healthy GPU. Their meanings, for the row.
const std::map<int, const char*>& harmless_meanings() {
  static const std::map<int, const char*> meanings = {
      {13, "graphics engine exception"},                // an out-of-range access or bad instruction in a kernel
      {31, "GPU memory page fault"},                    // an illegal address (MMU fault) of the application
      {43, "GPU stopped processing"},                   // a channel aborted after the application's own error
      {45, "preemptive cleanup after an earlier error"},  // channels torn down when a process is killed
  };
  return meanings;
}

// Degraded but still working: the memory repaired itself, or the error was contained to the
// application that hit it; the GPU wants a reset at the next chance, not a drain.
bool degraded_not_broken(int code) { return code == 63 || code == 92 || code == 94; }

std::string xid_text(int code, int count) {
  std::string meaning;
  if (auto h = harmless_meanings().find(code); h != harmless_meanings().end()) {
    meaning = std::string(h->second) + ", application-caused";
  } else {
    meaning = gpu::xid_meaning(code);
    if (meaning.empty()) meaning = "not in ddx's table: see NVIDIA's XID catalogue";
  }
  return printf_text("%d x%d (%s)", code, count, meaning.c_str());
}

// One row from one device's XID counts: the worst code decides.
Check judge_xids(const std::string& name, const std::string& device, const std::string& who,
                 const std::map<int, int>& counts) {
  std::vector<std::string> all, critical, warn;
  for (const auto& [code, n] : counts) {
    all.push_back(xid_text(code, n));
    const XidSeverity s = xid_severity(code);
    if (s == XidSeverity::Critical) critical.push_back(std::to_string(code));
    if (s == XidSeverity::Warn) warn.push_back(std::to_string(code));
  }
  Check check;
  if (counts.empty()) {
    check = make_check(name, State::Ok, who + ": no XID events since boot");
  } else if (!critical.empty()) {
    check = make_check(name, State::Critical, who + ": XIDs since boot: " + join(all, "; "),
                       "drain the node, reset the GPU (nvidia-smi -r) and run dcgmi diag -r 3; replace it if this "
                       "returns. XIDs count since boot: the row clears at the next reboot",
                       device + " XID " + join(critical, ","));
  } else if (!warn.empty()) {
    check = make_check(name, State::Warn, who + ": XIDs since boot: " + join(all, "; "),
                       "reset the GPU (nvidia-smi -r) when it is idle; watch for more (the row clears at the next "
                       "reboot)",
                       device + " XID " + join(warn, ","));
  } else {
    check = make_check(name, State::Ok, who + ": XIDs since boot: " + join(all, "; ") + " (whitelisted)");
  }
  for (const auto& [code, n] : counts) {
    check.metrics.push_back({"ddx_health_gpu_xid_events", static_cast<double>(n),
                             {{"device", device}, {"xid", std::to_string(code)}}, false});
  }
  return check;
}

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

// The status register of an mce record ("CPU 3: Machine Check: 0 Bank 7: 8c00004000010090"):
// bit 61 (UC) says the error was not corrected.
MachineCheck mce_record(const std::string& line) {
  static const std::regex record(R"(Machine Check( Exception)?: *[0-9a-fA-F]+ Bank [0-9]+: *([0-9a-fA-F]+))");
  std::smatch m;
  if (!std::regex_search(line, m, record)) return MachineCheck::None;
  const unsigned long long status = std::strtoull(m[2].str().c_str(), nullptr, 16);
  return (status >> 61) & 1 ? MachineCheck::Uncorrected : MachineCheck::Corrected;
}

// A line worth quoting in the row: the kernel's own words, cut to a readable length.
std::string quote_line(const std::string& line) { return "'" + (line.size() > 100 ? line.substr(0, 97) + "..." : line) + "'"; }

Check machine_checks(const std::vector<std::string>& lines) {
  int corrected = 0, uncorrected = 0;
  std::string first_corrected, first_uncorrected;
  for (const std::string& line : lines) {
    const MachineCheck kind = classify_machine_check(line);
    if (kind == MachineCheck::Corrected && corrected++ == 0) first_corrected = line;
    if (kind == MachineCheck::Uncorrected && uncorrected++ == 0) first_uncorrected = line;
  }
  Check check;
  if (uncorrected > 0) {
    check = make_check("machine checks", State::Critical,
                       printf_text("%d uncorrected and %d corrected machine-check messages since boot, first uncorrected: ",
                                   uncorrected, corrected) + quote_line(first_uncorrected),
                       "drain the node: an uncorrected CPU or memory error corrupts what runs there; find the part "
                       "(ras-mc-ctl --errors, edac-util -v, the BMC's event log) and replace it",
                       "uncorrected machine check");
  } else if (corrected > 0) {
    check = make_check("machine checks", State::Warn,
                       printf_text("%d corrected machine-check messages since boot, first: ", corrected) +
                           quote_line(first_corrected),
                       "corrected errors are repaired, but a DIMM or CPU that keeps logging them is failing: "
                       "watch the count (ras-mc-ctl --error-count) and replace the part if it grows",
                       "corrected machine checks");
  } else {
    check = make_check("machine checks", State::Ok, "no machine-check or EDAC errors since boot");
  }
  check.metrics.push_back({"ddx_health_machine_check_messages", static_cast<double>(corrected), {{"severity", "corrected"}}, false});
  check.metrics.push_back(
      {"ddx_health_machine_check_messages", static_cast<double>(uncorrected), {{"severity", "uncorrected"}}, false});
  return check;
}

std::string who(const gpu::GpuFacts& g) {
  return (g.name.empty() ? "GPU" : g.name) + " #" + std::to_string(g.index) + " (PCI " + g.pci_bus_id + ")";
}

}  // namespace

XidSeverity xid_severity(int code) {
  if (harmless_meanings().count(code)) return XidSeverity::Harmless;
  if (degraded_not_broken(code)) return XidSeverity::Warn;
  return gpu::xid_meaning(code).empty() ? XidSeverity::Warn : XidSeverity::Critical;
}

const std::vector<int>& harmless_xids() {
  static const std::vector<int> codes = [] {
    std::vector<int> c;
    for (const auto& [code, meaning] : harmless_meanings()) c.push_back(code);
    return c;
  }();
  return codes;
}

MachineCheck classify_machine_check(const std::string& line) {
  if (has(line, "EDAC")) {  // "EDAC MC0: 1 CE memory read error on ...": the count, then CE or UE
    static const std::regex count(R"(\b[0-9]+ (CE|UE)\b)");
    std::smatch m;
    if (!std::regex_search(line, m, count)) return MachineCheck::None;
    return m[1] == "UE" ? MachineCheck::Uncorrected : MachineCheck::Corrected;
  }
  if (has(line, "Memory failure: ") || has(line, "Uncorrected hardware memory error")) return MachineCheck::Uncorrected;
  if (!has(line, "[Hardware Error]")) return MachineCheck::None;
  if (has(line, "Machine check events logged")) return MachineCheck::Corrected;
  if (has(line, "event severity: corrected")) return MachineCheck::Corrected;
  if (has(line, "event severity: fatal") || has(line, "event severity: recoverable")) return MachineCheck::Uncorrected;
  return mce_record(line);  // the record's other lines (TSC, ADDR, PROCESSOR) count for nothing
}

std::vector<Check> kernel_log_checks(const std::vector<std::string>& lines, bool readable,
                                     const std::vector<gpu::GpuFacts>& gpus) {
  std::vector<Check> rows;
  if (!readable) {
    for (const auto& g : gpus) {
      rows.push_back(skipped_check("gpu" + std::to_string(g.index) + " xid", "kernel log not readable (see machine checks)"));
    }
    rows.push_back(make_check("machine checks", State::Warn,
                              "the kernel log (/dev/kmsg) could not be read: neither XIDs nor machine checks were looked at",
                              "run ddx health as root (SLURM's HealthCheckProgram, Prolog and Epilog are), or sysctl "
                              "kernel.dmesg_restrict=0; in a container, give it /dev/kmsg",
                              "kernel log not readable"));
    return rows;
  }
  for (const auto& g : gpus) {
    const std::string device = "gpu" + std::to_string(g.index);
    rows.push_back(judge_xids(device + " xid", device, who(g), gpu::xids_for(lines, g.pci_bus_id)));
  }
  for (const std::string& device : gpu::xid_devices(lines)) {
    bool known = false;
    for (const auto& g : gpus) known = known || gpu::same_pci_device(g.pci_bus_id, device);
    if (known) continue;
    rows.push_back(judge_xids("xid " + device, device, "PCI " + device + ", a device NVML does not list",
                              gpu::xids_for(lines, device)));
  }
  rows.push_back(machine_checks(lines));
  return rows;
}

}  // namespace ddx::health
