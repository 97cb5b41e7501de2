#include "harness/validate/link_types.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <set>

#include "ddx/errors/errors.h"
#include "ddx/text/svg_plot.h"
#include "ddx/text/text.h"

namespace ddx::validate {
namespace {

std::string short_bytes(double bytes) { return svg::short_number(bytes); }

}  // namespace

const std::vector<LinkType>& link_types() {
  // Floors: about a tenth of what a healthy link of that type reaches at 1 MiB or more (CPU rows
  // measured with ddx on a 2-core VM; GPU rows from nccl-tests figures in
  // shared/reference/cluster-validation.md, e.g. 460-480 GB/s NVLink all-reduce on H100/H200).
  // The CPU-loopback floor is lower still: a loaded 2-core CI machine measured 0.018 GB/s at
  // 64 KiB, and there the floor is a sanity bound, not a benchmark.
  // Minimum sizes: below them a collective's time is latency, and busbw says nothing about the
  // link. Gloo on loopback reached only 0.0025 GB/s at 16 KiB (under the floor) and 5x the floor
  // at 64 KiB; NCCL is latency-bound far longer: nccl-tests' NVLink/InfiniBand figures are taken
  // at hundreds of MiB, and 1 MiB reaches half of peak at best (docs/thresholds.md).
  static const std::vector<LinkType> types = {
      {"cpu-loopback", 0.002, "Gloo over loopback between CPU ranks on one host", "one host, no GPU", 64 << 10},
      {"ethernet", 0.05, "Gloo over TCP between hosts (1-10 GbE)", "several hosts, no GPU", 1 << 20},
      {"pcie", 2.0, "NCCL between GPUs of one host over PCIe / shared memory", "one host with GPUs", 64 << 20},
      {"nvlink", 100.0, "NCCL over NVLink / NVSwitch (A100, H100, H200)", "", 256 << 20},
      {"infiniband", 10.0, "NCCL between hosts over InfiniBand / RoCE (100-400 Gb/s per GPU)",
       "several hosts with GPUs", 256 << 20},
  };
  return types;
}

Expectation parse_expect(const std::string& text) {
  std::vector<std::string> names;
  for (const auto& t : link_types()) {
    if (t.name == text) {
      char source[160];
      std::snprintf(source, sizeof source, "--expect %s: %g GB/s", t.name.c_str(), t.min_busbw_gbs);
      return {t.min_busbw_gbs, source, t.name, t.min_bytes};
    }
    names.push_back(t.name);
  }
  std::string number = text;
  for (const char* unit : {"GB/s", "gb/s", "GBps"}) {
    const std::string u = unit;
    if (number.size() > u.size() && number.compare(number.size() - u.size(), u.size(), u) == 0) {
      number.resize(number.size() - u.size());
    }
  }
  char* end = nullptr;
  const double gbs = number.empty() ? 0 : std::strtod(number.c_str(), &end);
  if (number.empty() || !end || *end != '\0' || !(gbs > 0)) {
    throw UsageError("--expect " + text + ": not a link type (" + join(names) + ") or a busbw in GB/s (e.g. 25 or 25GB/s)");
  }
  char source[96];
  std::snprintf(source, sizeof source, "--expect %g GB/s", gbs);
  return {gbs, source};
}

Expectation detect_expectation(const nlohmann::json& doctor_report) {
  if (!doctor_report.is_object() || !doctor_report.contains("ranks")) {
    return {0, "no threshold: link type unknown (no doctor report)"};
  }
  std::set<std::string> hosts;
  int gpus = 0;
  for (const auto& r : doctor_report["ranks"]) {
    hosts.insert(r.value("host", ""));
    gpus += r.value("gpus", 0);
  }
  const std::string detected = hosts.size() > 1 ? (gpus > 0 ? "several hosts with GPUs" : "several hosts, no GPU")
                                                : (gpus > 0 ? "one host with GPUs" : "one host, no GPU");
  for (const auto& t : link_types()) {
    if (t.detected == detected) {
      char source[160];
      std::snprintf(source, sizeof source, "detected %s (%s): %g GB/s", t.name.c_str(), detected.c_str(),
                    t.min_busbw_gbs);
      return {t.min_busbw_gbs, source, t.name, t.min_bytes};
    }
  }
  return {0, "no threshold: link type unknown"};
}

std::string too_small_for(const Expectation& e, double max_bytes) {
  if (e.link.empty() || max_bytes >= e.min_bytes) return "";
  return "--expect " + e.link + " judges busbw at " + short_bytes(e.min_bytes) + " or more (below it a collective's " +
         "time is latency, far under the link's floor): pass --max-bytes " + short_bytes(e.min_bytes) +
         " or larger, or --expect GB/s for a floor of your own at " + short_bytes(max_bytes);
}

BusbwVerdict judge_busbw(const nlohmann::json& report, const Expectation& e) {
  BusbwVerdict v;
  std::vector<std::string> order;
  std::map<std::string, BusbwRow> largest;
  for (const auto& r : report.value("results", nlohmann::json::array())) {
    const std::string c = r["ddx"]["collective"].get<std::string>();
    const double bytes = r["size"].get<double>();
    double busbw = 0;
    for (const char* place : {"out_of_place", "in_place"}) {
      if (r.contains(place) && r[place].is_object()) busbw = std::max(busbw, r[place]["bus_bw"].get<double>());
    }
    if (!largest.count(c)) order.push_back(c);
    if (!largest.count(c) || bytes >= largest[c].bytes) largest[c] = {c, bytes, busbw, true};
  }
  const BusbwRow* slowest = nullptr;
  for (const auto& c : order) {
    BusbwRow row = largest[c];
    row.ok = e.min_busbw_gbs <= 0 || row.busbw_gbs >= e.min_busbw_gbs;
    v.passed = v.passed && row.ok;
    v.rows.push_back(row);
  }
  for (const auto& row : v.rows) {
    if (!slowest || row.busbw_gbs < slowest->busbw_gbs) slowest = &row;
  }
  char line[384];
  if (!slowest) {
    v.passed = false;
    v.summary = "no bandwidth results";
  } else if (e.min_busbw_gbs > 0 && slowest->bytes < e.min_bytes) {
    // A detected link type and a sweep that stopped short of its sizes: the floor would judge
    // latency. Said, not passed off as a bandwidth verdict.
    for (auto& row : v.rows) row.ok = true;
    v.passed = true;
    v.judged = false;
    std::snprintf(line, sizeof line,
                  "%zu collectives, slowest %s %.3g GB/s busbw at %s bytes: not judged, the %s floor (%g GB/s) holds "
                  "at %s or more (pass --max-bytes %s)",
                  v.rows.size(), slowest->collective.c_str(), slowest->busbw_gbs, short_bytes(slowest->bytes).c_str(),
                  e.link.c_str(), e.min_busbw_gbs, short_bytes(e.min_bytes).c_str(), short_bytes(e.min_bytes).c_str());
    v.summary = line;
  } else if (e.min_busbw_gbs <= 0) {
    std::snprintf(line, sizeof line, "%zu collectives, slowest %s %.3g GB/s busbw at %s bytes (%s)", v.rows.size(),
                  slowest->collective.c_str(), slowest->busbw_gbs, short_bytes(slowest->bytes).c_str(), e.source.c_str());
    v.summary = line;
  } else {
    size_t below = 0;
    for (const auto& row : v.rows) below += row.ok ? 0 : 1;
    std::snprintf(line, sizeof line, "%zu collectives, %zu below %g GB/s busbw at %s bytes; slowest %s %.3g GB/s (%s)",
                  v.rows.size(), below, e.min_busbw_gbs, short_bytes(slowest->bytes).c_str(),
                  slowest->collective.c_str(), slowest->busbw_gbs, e.source.c_str());
    v.summary = line;
  }
  return v;
}

}  // namespace ddx::validate
