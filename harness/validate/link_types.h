#pragma once
// The busbw a healthy link should reach, by link type: the floors `ddx validate` holds the
// bandwidth stage to (every collective's busbw at the largest message of the sweep). The link
// type comes from `--expect` (a name below, or a number of GB/s) or is detected from the
// doctor's facts (hosts, GPUs). The floors are deliberately low (a broken or misconfigured link
// is far below them; a slow-but-working one is not); pass `--expect GB/s` for a cluster's own
// acceptance figure (e.g. 0.9 x its nccl-tests result). No LibTorch.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ddx::validate {

struct LinkType {
  std::string name;
  double min_busbw_gbs;
  std::string what;       // the link, in words
  std::string detected;   // when it is chosen without --expect ("" : only by name)
  double min_bytes;       // the smallest message size at which the floor says something
};

const std::vector<LinkType>& link_types();

struct Expectation {
  double min_busbw_gbs = 0;  // 0: no threshold
  std::string source;        // "--expect 25 GB/s", "detected: cpu-loopback (one host, no GPU)", ...
  std::string link;          // the link type's name; "" for a number given with --expect
  double min_bytes = 0;      // below this largest size the floor is not judged (0: always judged)
};

// "--expect nvlink judges busbw at 256M or more ..." when the sweep's largest size is too small
// for a named link type's floor, else "". validate refuses such a run before any stage.
std::string too_small_for(const Expectation& e, double max_bytes);

// `--expect` text: a link type name or a number of GB/s ("25", "25GB/s"). UsageError otherwise,
// naming the known types.
Expectation parse_expect(const std::string& text);

// From the doctor's report (its "ranks" facts): hosts and GPUs. No threshold when the report
// is missing or unreadable.
Expectation detect_expectation(const nlohmann::json& doctor_report);

// Every collective's busbw at the largest message of a `ddx probe bandwidth --json` report
// (the better of out-of-place and in-place) against the expectation.
struct BusbwRow {
  std::string collective;
  double bytes = 0;
  double busbw_gbs = 0;
  bool ok = true;
};
struct BusbwVerdict {
  bool passed = true;
  bool judged = true;  // false: the sweep's largest size is below the floor's minimum size
  std::vector<BusbwRow> rows;
  std::string summary;  // one line: the slowest collective against the floor
};
BusbwVerdict judge_busbw(const nlohmann::json& bandwidth_report, const Expectation& expectation);

}  // namespace ddx::validate
