// validate's busbw floors on synthetic bandwidth reports: judged at the sweep's largest size,
// and not judged (said so, never a FAIL of a healthy link) when that size is below the one
// where the link type's floor means bandwidth rather than latency.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "ddx/errors/errors.h"
#include "harness/validate/link_types.h"

namespace ddx::validate {
namespace {

using nlohmann::json;

// A `ddx probe bandwidth --json` report: two collectives at two sizes each.
json report(double largest_bytes, double busbw_at_largest) {
  json results = json::array();
  for (const char* c : {"all_reduce", "all_gather"}) {
    for (double bytes : {largest_bytes / 4, largest_bytes}) {
      const double bw = bytes == largest_bytes ? busbw_at_largest : busbw_at_largest / 3;
      results.push_back({{"size", bytes}, {"ddx", {{"collective", c}}}, {"out_of_place", {{"bus_bw", bw}}},
                         {"in_place", {{"bus_bw", bw * 0.9}}}});
    }
  }
  return {{"results", results}};
}

json doctor(int hosts, int gpus) {
  json ranks = json::array();
  for (int h = 0; h < hosts; ++h) ranks.push_back({{"host", "h" + std::to_string(h)}, {"gpus", gpus}});
  return {{"ranks", ranks}};
}

TEST(LinkTypes, FloorJudgedAtTheLargestSize) {
  const Expectation cpu = detect_expectation(doctor(1, 0));
  EXPECT_EQ(cpu.link, "cpu-loopback");
  EXPECT_TRUE(judge_busbw(report(1 << 20, 0.2), cpu).passed);
  const BusbwVerdict slow = judge_busbw(report(1 << 20, 0.001), cpu);
  EXPECT_FALSE(slow.passed);
  EXPECT_TRUE(slow.judged);
  EXPECT_NE(slow.summary.find("2 collectives, 2 below 0.002 GB/s busbw at 1M bytes"), std::string::npos) << slow.summary;
}

TEST(LinkTypes, BelowTheFloorsSizeTheVerdictSaysNotJudged) {
  // 16 KiB on loopback measured 0.0025 GB/s here, and less on a loaded host: latency.
  const Expectation cpu = detect_expectation(doctor(1, 0));
  const BusbwVerdict v = judge_busbw(report(16 << 10, 0.001), cpu);
  EXPECT_TRUE(v.passed);
  EXPECT_FALSE(v.judged);
  EXPECT_NE(v.summary.find("not judged, the cpu-loopback floor (0.002 GB/s) holds at 64K or more (pass --max-bytes 64K)"),
            std::string::npos)
      << v.summary;
  // A GPU host's floor needs far larger messages than validate's 1M default.
  const Expectation ib = detect_expectation(doctor(2, 8));
  EXPECT_EQ(ib.link, "infiniband");
  EXPECT_FALSE(judge_busbw(report(1 << 20, 3.0), ib).judged);
  EXPECT_FALSE(judge_busbw(report(256 << 20, 3.0), ib).passed);
}

TEST(LinkTypes, NamedLinkTypesRefuseASweepTooSmallAndNumbersAreTheUsersOwn) {
  EXPECT_EQ(too_small_for(parse_expect("nvlink"), 1 << 20).rfind("--expect nvlink judges busbw at 256M or more", 0), 0u);
  EXPECT_EQ(too_small_for(parse_expect("nvlink"), 256 << 20), "");
  EXPECT_EQ(too_small_for(parse_expect("cpu-loopback"), 64 << 10), "");
  EXPECT_NE(too_small_for(parse_expect("cpu-loopback"), 16 << 10), "");
  EXPECT_EQ(too_small_for(parse_expect("25GB/s"), 1024), "");  // a number is judged wherever it is given
  EXPECT_TRUE(judge_busbw(report(1024, 0.001), parse_expect("0.5")).judged);
  EXPECT_THROW(parse_expect("warp-drive"), UsageError);
}

}  // namespace
}  // namespace ddx::validate
