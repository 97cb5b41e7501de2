#include "health/level1_node.h"

#include <sys/timex.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ddx/text/text.h"
#include "doctor/doctor_facts.h"
#include "health/level1_rows.h"

namespace ddx::health {
namespace {

struct KeptRow {
  const char* doctor_name;
  const char* health_name;
  const char* reason;
};

// The doctor's rows that describe this node, with their names here and drain reasons.
const std::vector<KeptRow>& kept_rows() {
  static const std::vector<KeptRow> rows = {
      {"/dev/shm vs local ranks", "shm", "/dev/shm short for the local ranks"},
      {"ulimit -n (open files)", "ulimit nofile", "ulimit -n low"},
      {"ulimit -l (locked memory)", "ulimit memlock", "ulimit -l limited"},
      {"ulimit -c (core dumps)", "ulimit core", "core dumps off"},
      {"same versions on every rank", "versions", "versions differ"},
      {"same CPU kernels on every rank", "cpu kernels", "CPU kernels differ"},
      {"GPUs vs local ranks", "gpus vs local ranks", "fewer GPUs than local ranks"},
      {"free disk at the save folder", "disk", "low disk"},
      {"CPU governor and NUMA", "cpu governor", "CPU governor powersave"},
  };
  return rows;
}

// "MemTotal:       32817420 kB" -> bytes.
bool meminfo_value(const std::string& line, const char* key, uint64_t& bytes) {
  if (line.rfind(key, 0) != 0) return false;
  std::istringstream in(line.substr(std::strlen(key)));
  uint64_t kib = 0;
  if (!(in >> kib)) return false;
  bytes = kib * 1024;
  return true;
}

std::string gib(uint64_t bytes) { return printf_text("%.1f GiB", static_cast<double>(bytes) / (1ULL << 30)); }

}  // namespace

std::vector<Check> doctor_node_rows(const std::vector<doctor::CheckRow>& rows) {
  std::vector<Check> out;
  for (const doctor::CheckRow& row : rows) {
    for (const KeptRow& kept : kept_rows()) {
      if (row.name == kept.doctor_name) out.push_back(from_doctor_row(row, kept.health_name, kept.reason));
    }
  }
  return out;
}

const std::vector<std::string>& doctor_rows_left_out() {
  static const std::vector<std::string> names = {
      "clock skew between hosts",     // one node: no peer; the clock row reads the kernel's NTP state instead
      "interfaces named in env",      // this process's NCCL_*/GLOO_* variables, not a job's
      "MASTER_ADDR from every rank",  // the rendezvous of a job
      "interface Gloo will use",      // the rendezvous of a job
      "hosts reach each other",       // other hosts
      "OMP_NUM_THREADS vs cores",     // this process's variable, not a job's
  };
  return names;
}

std::vector<Check> doctor_checks_of_node(const NodeFacts& node, const EnvMap& env) {
  doctor::FactsInput input;
  input.info.hostname = node.host;
  input.info.world_size = node.local_ranks;
  input.info.local_world_size = node.local_ranks;
  input.info.master_addr = "127.0.0.1";  // numeric and local: no name lookup, no network
  input.save_dir = node.disk_path;
  input.versions = node.versions;
  input.gpus = node.gpus;
  input.shm_path = node.shm_path;
  input.sysfs_root = node.sysfs_root;
  input.cpuinfo_path = node.cpuinfo_path;
  input.resolve_hostname = false;  // a node without a DNS entry would hold level 1 for seconds
  try {
    return doctor_node_rows(doctor::evaluate({doctor::collect_facts(env, input)}));
  } catch (const std::exception& e) {
    Check unknown = make_check("node facts", State::Unknown, std::string("the doctor's facts could not be collected: ") + e.what(),
                               "fix what the message names (is " + node.shm_path + " there?)", "node facts unreadable");
    return {unknown};
  }
}

MemoryFacts read_memory(const std::string& meminfo_path) {
  MemoryFacts m;
  std::ifstream in(meminfo_path);
  if (!in) {
    m.error = "cannot read " + meminfo_path;
    return m;
  }
  bool total = false, available = false;
  for (std::string line; std::getline(in, line);) {
    total = meminfo_value(line, "MemTotal:", m.total_bytes) || total;
    available = meminfo_value(line, "MemAvailable:", m.available_bytes) || available;
  }
  if (!total || !available) m.error = meminfo_path + " has no MemTotal or MemAvailable (a kernel before 3.14?)";
  return m;
}

Check judge_memory(const MemoryFacts& m) {
  if (!m.error.empty()) return make_check("memory", State::Unknown, m.error, "", "memory unreadable");
  const double fraction = m.total_bytes ? static_cast<double>(m.available_bytes) / m.total_bytes : 0;
  const std::string value = printf_text("%s available of %s (%.1f%%)", gib(m.available_bytes).c_str(),
                                        gib(m.total_bytes).c_str(), 100 * fraction);
  Check check = fraction < kMemoryWarnFraction
                    ? make_check("memory", State::Warn, value,
                                 "see what holds it (ps aux --sort=-rss | head): leftover processes of a finished job "
                                 "make the next one run out of memory",
                                 "little memory available")
                    : make_check("memory", State::Ok, value);
  check.metrics.push_back({"ddx_health_memory_available_bytes", static_cast<double>(m.available_bytes), {}, false});
  return check;
}

ClockFacts read_clock() {
  ClockFacts c;
  struct timex t {};
  t.modes = 0;  // read only: no privilege needed
  const int state = ::adjtimex(&t);
  if (state < 0) {
    c.error = std::string("adjtimex: ") + std::strerror(errno);
    return c;
  }
  c.synchronised = !(t.status & STA_UNSYNC) && state != TIME_ERROR;
  c.max_error_us = t.maxerror;
  c.estimated_error_us = t.esterror;
  return c;
}

Check judge_clock(const ClockFacts& c) {
  if (!c.error.empty()) return skipped_check("clock", "the kernel's NTP state is not readable here (" + c.error + ")");
  const double max_ms = c.max_error_us / 1000.0;
  const char* fix =
      "run chronyd or ntpd (timedatectl set-ntp true): hosts whose clocks drift apart disagree in logs, timeouts "
      "and certificates";
  Check check;
  if (!c.synchronised) {
    check = make_check("clock", State::Warn,
                       "not synchronised: the kernel's STA_UNSYNC is set (no NTP daemon disciplines this clock)", fix,
                       "clock not synchronised");
  } else if (max_ms > kClockMaxErrorWarnMs) {
    check = make_check("clock", State::Warn,
                       printf_text("synchronised, but the kernel's maximum error is %.1f ms (over %.0f ms)", max_ms,
                                   kClockMaxErrorWarnMs),
                       fix, "clock error high");
  } else {
    check = make_check("clock", State::Ok,
                       printf_text("synchronised (maximum error %.1f ms, estimated %.1f ms)", max_ms,
                                   c.estimated_error_us / 1000.0));
  }
  check.metrics.push_back({"ddx_health_clock_synchronised", c.synchronised ? 1.0 : 0.0, {}, false});
  check.metrics.push_back({"ddx_health_clock_max_error_seconds", c.max_error_us / 1e6, {}, false});
  return check;
}

}  // namespace ddx::health
