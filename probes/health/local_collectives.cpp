#include "health/local_collectives.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "ddx/text/text.h"

namespace ddx::health {
namespace {

using nlohmann::json;

// A private folder for the child's JSON and log, removed with them.
class Scratch {
 public:
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddx-health-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a folder like " + pattern);
    dir_ = pattern;
  }
  ~Scratch() {
    for (const std::string& f : files_) ::unlink(f.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string file(const std::string& name) {
    files_.push_back(dir_ + "/" + name);
    return files_.back();
  }

 private:
  std::string dir_;
  std::vector<std::string> files_;
};

// The first line that reports an error, else the last non-empty line.
std::string telling_line(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (error.empty() && (line.find("error") != std::string::npos || line.find("FAILED") != std::string::npos)) error = line;
  }
  return error.empty() ? last : error;
}

LocalRunResult run_bandwidth_probe(const LocalRun& run, const std::vector<std::string>& probe_args) {
  Scratch scratch;
  const std::string json_path = scratch.file("result.json"), log_path = scratch.file("probe.log");
  std::vector<std::string> argv{run.ddx, "launch", "-np", std::to_string(run.ranks), "--",
                                run.ddx, "probe",  "bandwidth", "--engine", run.engine};
  argv.insert(argv.end(), probe_args.begin(), probe_args.end());
  // The probe's own watchdog first, with the message naming the phase; the hard timeout after it.
  argv.insert(argv.end(), {"-T", printf_text("%.0f", std::max(5.0, run.timeout_s - 10)), "--json", json_path});
  LocalRunResult result;
  result.outcome = run_process(argv, {}, log_path, run.timeout_s);
  result.log_line = telling_line(log_path);
  std::ifstream in(json_path);
  if (in) {
    try {
      result.json = json::parse(in);
    } catch (const json::exception&) {
      // A torn file is no result: judged as such.
    }
  }
  return result;
}

// Sizes where each engine's bandwidth has levelled off, few iterations: seconds, not minutes.
std::vector<std::string> message_args(const LocalRun& run) {
  if (run.engine == "nccl") return {"-b", "256M", "-e", "256M", "-n", "20", "-w", "5"};
  return {"-b", "8M", "-e", "8M", "-n", "10", "-w", "2"};
}

std::string devices_text(const LocalRun& run) {
  return printf_text("%d %s", run.ranks, run.engine == "nccl" ? "GPUs (NCCL)" : "CPU ranks (Gloo)");
}

// The row of a run that gave no usable result: how it ended, in its own words.
Check no_result(Check c, const LocalRun& run, const LocalRunResult& r, const std::string& what) {
  const bool gpus = run.engine == "nccl";
  if (r.outcome.timed_out) {
    c.value = printf_text("%s across %s gave no result within %.0f s", what.c_str(), devices_text(run).c_str(), run.timeout_s);
  } else {
    c.value = printf_text("%s across %s failed (exit %d): %s", what.c_str(), devices_text(run).c_str(), r.outcome.exit_code,
                          r.log_line.c_str());
  }
  if (gpus) {
    c.state = State::Critical;
    c.reason = what + (r.outcome.timed_out ? " hung" : " failed");
    c.remediation = "the GPUs of this node cannot " + what +
                    ": look for XIDs (level 1), run `ddx probe bandwidth` under `ddx launch` by hand, check NVLink/PCIe";
  } else {
    c.state = State::Unknown;
    c.remediation = "ddx could not run its local " + what + " check: run `ddx launch -np 2 -- ddx probe bandwidth` by hand";
  }
  return c;
}

}  // namespace

Check judge_all_reduce(const LocalRun& run, const LocalRunResult& r) {
  Check c;
  c.name = "all-reduce";
  if (!r.json || !r.json->contains("out_of_bounds") || !r.json->contains("average_bus_bandwidth")) {
    return no_result(c, run, r, "all-reduce");
  }
  const json& doc = *r.json;
  const int wrong_results = doc["out_of_bounds"].value("count", 0);
  if (wrong_results > 0) {
    int64_t wrong_elements = 0;
    for (const json& collective : doc["ddx"].value("collectives", json::array())) {
      wrong_elements += collective.value("wrong_elements", int64_t{0});
    }
    std::string first;
    for (const json& row : doc.value("results", json::array())) {
      for (const char* placement : {"out_of_place", "in_place"}) {
        const json p = row["ddx"].value(placement, json());
        if (first.empty() && p.is_object() && p.contains("first_wrong")) {
          const json& w = p["first_wrong"];
          first = printf_text("; first on rank %d, element %lld: got %g, want %g", w.value("rank", -1),
                              static_cast<long long>(w.value("element", int64_t{-1})), w.value("got", 0.0),
                              w.value("expected", 0.0));
        }
      }
    }
    c.state = State::Critical;
    c.value = printf_text("wrong data across %s: %lld wrong elements in %d results", devices_text(run).c_str(),
                          static_cast<long long>(wrong_elements), wrong_results) +
              first;
    c.reason = "all-reduce wrong data";
    c.remediation = run.engine == "nccl"
                        ? "a GPU or link of this node corrupts data: drain it, run `ddx probe bandwidth --pairs` "
                          "and the GEMM check per GPU to find which"
                        : "this node's CPUs or memory corrupt data: drain it and run a memory test (memtester, EDAC counts)";
    return c;
  }
  if (r.outcome.exit_code != 0) return no_result(c, run, r, "all-reduce");
  const double busbw = doc["average_bus_bandwidth"].value("bandwidth", 0.0);
  c.value = printf_text("%.2f GB/s bus bandwidth across %s, every result checked", busbw, devices_text(run).c_str());
  c.metrics.push_back({"ddx_health_allreduce_busbw_gbps",
                       busbw,
                       {{"engine", run.engine}, {"ranks", std::to_string(run.ranks)}},
                       true});
  return c;
}

Check judge_pairwise(const LocalRun& run, const LocalRunResult& r) {
  Check c;
  c.name = "links";
  if (!r.json || !r.json->contains("ddx") || !(*r.json)["ddx"].contains("pairs")) return no_result(c, run, r, "exchange pairwise");
  const json& doc = (*r.json)["ddx"];
  auto gpu = [](int rank) { return "gpu" + std::to_string(rank); };  // rank r drives GPU r (ddx launch)
  int64_t wrong = 0;
  std::vector<std::string> wrong_links;
  for (const json& p : doc["pairs"]) {
    const int a = p.value("a", -1), b = p.value("b", -1);
    const double gbs = p.value("bw", 0.0);
    c.metrics.push_back({"ddx_health_link_gbps", gbs, {{"a", gpu(a)}, {"b", gpu(b)}}, true});
    if (p.value("nwrong", int64_t{0}) > 0) {
      wrong += p.value("nwrong", int64_t{0});
      wrong_links.push_back(gpu(a) + "-" + gpu(b));
    }
  }
  const double median = doc.value("median_bw", 0.0);
  if (wrong > 0) {
    c.state = State::Critical;
    c.value = printf_text("%lld wrong elements on links ", static_cast<long long>(wrong)) + join(wrong_links);
    c.reason = "link " + wrong_links.front() + " wrong data";
    c.remediation = "a GPU or link corrupts data: drain the node; reset the GPUs and check NVLink (nvidia-smi nvlink -e)";
    return c;
  }
  std::vector<std::string> slow;
  for (const json& s : doc.value("slow_links", json::array())) {
    slow.push_back(gpu(s.value("a", -1)) + "-" + gpu(s.value("b", -1)) + printf_text(" %.1f GB/s", s.value("bw", 0.0)));
  }
  if (!slow.empty()) {
    c.state = State::Warn;
    c.value = printf_text("slow links (median link %.1f GB/s): ", median) + join(slow);
    c.reason = "slow GPU links";
    c.remediation = "check NVLink and PCIe of those GPUs (nvidia-smi topo -m, nvidia-smi nvlink -s, level 1's pcie rows)";
    return c;
  }
  if (r.outcome.exit_code != 0) return no_result(c, run, r, "exchange pairwise");
  c.value = printf_text("%zu links between %d GPUs, median %.1f GB/s, data checked", c.metrics.size(), run.ranks, median);
  return c;
}

Check all_reduce_check(const LocalRun& run) {
  std::vector<std::string> args{"--op-list", "all_reduce", "-c", "1", "--check-timed"};
  const auto sizes = message_args(run);
  args.insert(args.end(), sizes.begin(), sizes.end());
  return judge_all_reduce(run, run_bandwidth_probe(run, args));
}

Check pairwise_check(const LocalRun& run) {
  std::vector<std::string> args{"--pairs"};
  const auto sizes = message_args(run);
  args.insert(args.end(), sizes.begin(), sizes.end());
  return judge_pairwise(run, run_bandwidth_probe(run, args));
}

}  // namespace ddx::health
