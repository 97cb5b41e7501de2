// `ddx validate --junit FILE`: the run as JUnit XML, so a CI system shows one test case per
// stage and per check (doctor checks, bandwidth collectives, compute and memory figures per
// rank, baseline regressions) instead of one opaque job.
#include <nlohmann/json.hpp>

#include <fstream>

#include "harness/common/junit.h"
#include "ddx/text/text.h"
#include "harness/validate/validate.h"

namespace ddx::validate {
namespace {

using nlohmann::json;

// The doctor's and the GPU health stage's checks (the same table format).
void check_cases(const ValidateOptions& o, const std::string& file, const std::string& classname,
                 std::vector<JunitCase>& cases) {
  const json doctor = read_json(o.out_dir + "/" + file);
  if (!doctor.is_object()) return;
  for (const auto& c : doctor.value("checks", json::array())) {
    JunitCase k{classname, c["check"].get<std::string>()};
    const std::string status = c["status"].get<std::string>();
    k.failed = status == "FAIL";
    k.skipped = status == "SKIP";
    if (k.failed || k.skipped) k.message = c["value"].get<std::string>();
    if (k.failed) k.text = c["fix"].get<std::string>();
    cases.push_back(k);
  }
}

// One case per metric and rank of compute.json / memory.json, failed where that rank (or its
// host) was named slow on that metric.
void rank_probe_cases(const ValidateOptions& o, const std::string& probe, std::vector<JunitCase>& cases) {
  const json j = read_json(o.out_dir + "/" + probe + ".json");
  if (!j.is_object() || !j.contains("ranks")) return;
  for (const auto& m : j["metrics"]) {
    const std::string key = m["key"];
    for (const auto& r : j["ranks"]) {
      const int rank = r["rank"].get<int>();
      const std::string host = r["host"].get<std::string>();
      JunitCase k{"ddx.validate." + probe,
                  m["label"].get<std::string>() + " rank " + std::to_string(rank) + " (" + host + ")"};
      for (const auto& f : j["slow_ranks"]) {
        if (f["metric"] == key && f["rank"] == rank) {
          k.failed = true;
          k.message = printf_text("%.4g %s, peers' median %.4g, named below %.4g", f["value"].get<double>(),
                                  m["unit"].get<std::string>().c_str(), f["peer_median"].get<double>(),
                                  f["threshold"].get<double>());
        }
      }
      for (const auto& f : j["slow_hosts"]) {
        if (f["metric"] == key && f["host"] == host) {
          k.failed = true;
          k.message += (k.message.empty() ? "" : "; ") + std::string("host ") + host + " named slow";
        }
      }
      cases.push_back(k);
    }
  }
}

}  // namespace

std::string junit_report(const ValidateOptions& o, const std::vector<StageResult>& results) {
  std::vector<JunitCase> cases;
  for (const auto& r : results) {
    JunitCase stage{"ddx.validate", r.name, r.seconds};
    stage.skipped = !r.ran;
    stage.failed = r.ran && !r.passed;
    stage.message = r.ran ? r.summary : "not run: an earlier stage failed (--keep-going runs every stage)";
    if (stage.failed && !r.log.empty()) stage.text = "log: " + o.out_dir + "/" + r.log;
    cases.push_back(stage);
    if (!r.ran) continue;
    if (r.name == "doctor") check_cases(o, "doctor.json", "ddx.validate.doctor", cases);
    if (r.name == "gpu health") check_cases(o, "gpu-health.json", "ddx.validate.gpu_health", cases);
    if (r.name == "compute" || r.name == "memory") rank_probe_cases(o, r.name, cases);
    if (r.name == "bandwidth" && r.details.is_object()) {
      for (const auto& c : r.details["collectives"]) {
        JunitCase k{"ddx.validate.bandwidth", c["collective"].get<std::string>()};
        k.failed = !c["ok"].get<bool>();
        k.message = printf_text("busbw %.4g GB/s at %.0f B; floor %.4g GB/s (%s)", c["busbw_gbs"].get<double>(),
                                c["bytes"].get<double>(), r.details["min_busbw_gbs"].get<double>(),
                                r.details["threshold_source"].get<std::string>().c_str());
        cases.push_back(k);
      }
    }
    if (r.name == "baseline" && r.details.is_object()) {
      for (const auto& g : r.details["regressions"]) {
        JunitCase k{"ddx.validate.baseline", g["figure"].get<std::string>()};
        k.failed = true;
        k.message = printf_text("%.4g before, %.4g now (%+.0f%%)", g["before"].get<double>(), g["after"].get<double>(),
                                g["change"].get<double>() * 100);
        cases.push_back(k);
      }
    }
  }
  return junit_xml("ddx validate", cases);
}

}  // namespace ddx::validate
