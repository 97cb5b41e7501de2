// Other processes' CPU use during the active checks (other_load.h).
#include "health/other_load.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "ddx/text/text.h"

namespace ddx::health {
namespace {

std::string read_all(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

}  // namespace

std::optional<CpuTicks> parse_cpu_ticks(const std::string& proc_stat, const std::string& proc_self_stat) {
  CpuTicks t;
  std::istringstream lines(proc_stat);
  std::string line;
  bool aggregate = false;
  while (std::getline(lines, line)) {
    if (line.rfind("cpu ", 0) == 0) {
      // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest time is
      // already inside user and nice)
      std::istringstream fields(line.substr(4));
      uint64_t v[8] = {};
      int n = 0;
      while (n < 8 && fields >> v[n]) ++n;
      if (n < 7) return std::nullopt;
      t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + (n > 7 ? v[7] : 0);
      t.total = t.busy + v[3] + v[4];
      aggregate = true;
    } else if (line.rfind("cpu", 0) == 0 && line.size() > 3 && std::isdigit(static_cast<unsigned char>(line[3]))) {
      ++t.cpus;
    }
  }
  if (!aggregate || t.cpus == 0) return std::nullopt;
  // pid (comm) state ...: the command may hold spaces and parentheses, so count from the last ')'.
  // After it, utime, stime, cutime and cstime are fields 14 to 17 of the line, 12 to 15 here.
  const size_t close = proc_self_stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(proc_self_stat.substr(close + 1));
  std::string field;
  for (int i = 1; i <= 15; ++i) {
    if (!(fields >> field)) return std::nullopt;
    if (i >= 12) {
      try {
        t.ours += std::stoull(field);
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return t;
}

std::optional<CpuTicks> read_cpu_ticks() { return parse_cpu_ticks(read_all("/proc/stat"), read_all("/proc/self/stat")); }

OtherLoad other_load(const CpuTicks& before, const CpuTicks& after) {
  OtherLoad load;
  if (after.total <= before.total || after.busy < before.busy) return load;
  const double total = static_cast<double>(after.total - before.total);
  const double busy = static_cast<double>(after.busy - before.busy);
  const double ours = after.ours >= before.ours ? static_cast<double>(after.ours - before.ours) : 0;
  load.share = std::clamp((busy - ours) / total, 0.0, 1.0);
  load.cpus = load.share * after.cpus;
  return load;
}

Check other_load_row(const std::optional<CpuTicks>& before, const std::optional<CpuTicks>& after,
                     std::vector<Check>& measured) {
  Check c;
  c.name = "other load";
  if (!before || !after) {
    c.skipped = true;
    c.value = "/proc/stat or /proc/self/stat not readable: other processes' load unknown, figures judged as they are";
    return c;
  }
  const OtherLoad load = other_load(*before, *after);
  c.value = printf_text("other processes used %.2f of %d CPUs (%.0f%%) while the figures were measured", load.cpus,
                        after->cpus, 100 * load.share);
  c.metrics.push_back({"ddx_health_other_cpus_used", load.cpus, {}, false});
  if (load.busy()) {
    c.value += printf_text(": over %.0f%%, so no figure is judged (a busy node's rates measure the load, not the node)",
                           100 * kBusyShare);
    for (Check& check : measured) {
      for (Metric& metric : check.metrics) metric.judged = false;
    }
  }
  return c;
}

}  // namespace ddx::health
