// The `ddx health` report (probes/health/health_check.h): the overall state, exit codes, the
// verdict line, the SLURM drain reason, the JSON round trip and node_exporter's textfile format.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "health/health_check.h"
#include "unit/prometheus_textfile.h"

namespace ddx::health {
namespace {

using testing::named;
using testing::parse_textfile;

Check row(const std::string& name, State state, const std::string& reason = "", bool skipped = false) {
  Check c;
  c.name = name;
  c.state = state;
  c.skipped = skipped;
  c.value = "measured " + name;
  c.reason = reason;
  if (state != State::Ok) c.remediation = "fix " + name;
  return c;
}

Report report_of(std::vector<Check> checks) {
  Report r;
  r.host = "node-b";
  r.level = 2;
  r.device_model = "NVIDIA H100 80GB HBM3";
  r.ddx_version = "0.1.0";
  r.started = "2025-03-04T05:06:07Z";
  r.seconds = 12.34;
  r.checks = std::move(checks);
  return r;
}

TEST(HealthOverall, WorstStateWinsCriticalOverUnknownOverWarnOverOk) {
  EXPECT_EQ(overall(report_of({row("a", State::Ok), row("b", State::Ok)})), State::Ok);
  EXPECT_EQ(overall(report_of({row("a", State::Ok), row("b", State::Warn)})), State::Warn);
  EXPECT_EQ(overall(report_of({row("a", State::Warn), row("b", State::Unknown), row("c", State::Ok)})), State::Unknown);
  EXPECT_EQ(overall(report_of({row("a", State::Unknown), row("b", State::Critical), row("c", State::Warn)})), State::Critical);
  EXPECT_EQ(overall(report_of({row("a", State::Critical), row("b", State::Unknown)})), State::Critical);
}

TEST(HealthOverall, SkippedChecksCountForNothingAndAllSkippedIsUnknown) {
  EXPECT_EQ(overall(report_of({row("a", State::Ok), row("b", State::Critical, "", true)})), State::Ok);
  EXPECT_EQ(overall(report_of({row("a", State::Ok, "", true), row("b", State::Ok, "", true)})), State::Unknown);
  EXPECT_EQ(overall(report_of({})), State::Unknown);
}

TEST(HealthOverall, ExitCodesAreNagios) {
  EXPECT_EQ(exit_code(report_of({row("a", State::Ok)})), 0);
  EXPECT_EQ(exit_code(report_of({row("a", State::Warn)})), 1);
  EXPECT_EQ(exit_code(report_of({row("a", State::Critical)})), 2);
  EXPECT_EQ(exit_code(report_of({row("a", State::Unknown)})), 3);
  EXPECT_EQ(exit_code(report_of({})), 3);
  EXPECT_STREQ(to_string(State::Ok), "OK");
  EXPECT_STREQ(to_string(State::Warn), "WARN");
  EXPECT_STREQ(to_string(State::Critical), "CRITICAL");
  EXPECT_STREQ(to_string(State::Unknown), "UNKNOWN");
}

TEST(HealthVerdict, NamesStateHostLevelTimeTheWorstCheckAndTheTally) {
  Report r = report_of({row("shm", State::Ok), row("gemm gpu3 bf16", State::Critical), row("clock", State::Warn),
                        row("path /x", State::Ok, "", true), row("gpu1 ecc", State::Critical)});
  r.checks[1].value = "wrong at (5,17): 31 not 32";
  EXPECT_EQ(verdict_line(r),
            "ddx health: CRITICAL on node-b (level 2, 12.3 s): gemm gpu3 bf16 wrong at (5,17): 31 not 32 "
            "(+1 more CRITICAL); 5 checks: 1 OK, 1 WARN, 2 CRITICAL, 1 skipped");
}

TEST(HealthVerdict, OkAndNothingCheckedAreSaidPlainly) {
  EXPECT_EQ(verdict_line(report_of({row("shm", State::Ok), row("ulimit", State::Ok)})),
            "ddx health: OK on node-b (level 2, 12.3 s): 2 checks: 2 OK");
  EXPECT_EQ(verdict_line(report_of({row("gpu", State::Ok, "", true)})),
            "ddx health: UNKNOWN on node-b (level 2, 12.3 s): nothing was checked; 1 checks: 1 skipped");
}

TEST(HealthVerdict, IsOneLineWhateverAValueHolds) {
  Report r = report_of({row("dmesg", State::Warn)});
  r.checks[0].value = "line one\nline two";
  EXPECT_EQ(verdict_line(r).find('\n'), std::string::npos);
}

TEST(HealthDrainReason, PrefixedAndOnlyCriticalReasons) {
  Report r = report_of({row("gpu3 ecc", State::Critical, "gpu3 uncorrectable ECC"), row("clock", State::Warn, "clock skew"),
                        row("dmesg", State::Unknown, "dmesg unreadable"), row("path /scratch", State::Critical, "/scratch full")});
  EXPECT_EQ(drain_reason(r), "ddx: gpu3 uncorrectable ECC; /scratch full");
}

TEST(HealthDrainReason, EmptyWithoutCriticalAndSkippedCriticalIgnored) {
  EXPECT_EQ(drain_reason(report_of({row("a", State::Warn, "w"), row("b", State::Unknown, "u")})), "");
  EXPECT_EQ(drain_reason(report_of({row("a", State::Critical, "x", true)})), "");
}

TEST(HealthDrainReason, FallsBackToTheCheckNameAndDropsRepeats) {
  Report r = report_of({row("gpu0 xid", State::Critical, "XID 79"), row("gpu1 xid", State::Critical, "XID 79"),
                        row("path /a", State::Critical)});
  EXPECT_EQ(drain_reason(r), "ddx: XID 79; path /a");
}

TEST(HealthDrainReason, CutAtWholeReasonsWithACountOfTheRest) {
  std::vector<Check> checks;
  for (int i = 0; i < 10; ++i) checks.push_back(row("c" + std::to_string(i), State::Critical, "gpu" + std::to_string(i) + " uncorrectable ECC"));
  const Report r = report_of(checks);
  // "ddx: gpu0 uncorrectable ECC; gpu1 uncorrectable ECC; +8 more" is 60 characters.
  EXPECT_EQ(drain_reason(r, 60), "ddx: gpu0 uncorrectable ECC; gpu1 uncorrectable ECC; +8 more");
  EXPECT_EQ(drain_reason(r, 59), "ddx: gpu0 uncorrectable ECC; +9 more");
  for (size_t max = 12; max <= 400; ++max) {
    const std::string reason = drain_reason(r, max);
    EXPECT_LE(reason.size(), max) << reason;
    EXPECT_EQ(reason.rfind("ddx: ", 0), 0u) << reason;
    // Every reason in it is whole, but for a first one too long to fit alone (cut, with "...").
    std::stringstream pieces(reason.substr(5));
    std::string piece;
    for (int index = 0; std::getline(pieces, piece, ';'); ++index) {
      if (!piece.empty() && piece[0] == ' ') piece = piece.substr(1);
      const bool whole = std::regex_match(piece, std::regex(R"(gpu\d uncorrectable ECC|\+\d+ more)"));
      const bool cut_first = index == 0 && piece.size() > 3 && piece.substr(piece.size() - 3) == "..." &&
                             std::string("gpu0 uncorrectable ECC").rfind(piece.substr(0, piece.size() - 3), 0) == 0;
      EXPECT_TRUE(whole || cut_first) << "piece '" << piece << "' of " << reason;
    }
    if (max >= 36) EXPECT_EQ(reason.find("..."), std::string::npos) << reason;  // one whole reason fits
  }
  // Everything fits: no count.
  EXPECT_EQ(drain_reason(r, 1000).find("more"), std::string::npos);
}

TEST(HealthDrainReason, AFirstReasonTooLongAloneIsCutRatherThanLost) {
  const Report r = report_of({row("a", State::Critical, std::string(200, 'x')), row("b", State::Critical, "y")});
  const std::string reason = drain_reason(r, 40);
  EXPECT_EQ(reason.size(), 40u);
  EXPECT_EQ(reason, "ddx: " + std::string(23, 'x') + "...; +1 more");
}

TEST(HealthDrainReason, IsOneLine) {
  const Report r = report_of({row("a", State::Critical, "bad\nthing")});
  EXPECT_EQ(drain_reason(r), "ddx: bad thing");
}

TEST(HealthTable, OneRowPerCheckWithFixesForTheBadOnes) {
  const std::string table = format_table(report_of({row("shm", State::Ok), row("gpu0 ecc", State::Critical), row("path /x", State::Ok, "", true)}));
  EXPECT_EQ(table,
            "check     state     value\n"
            "shm       OK        measured shm\n"
            "gpu0 ecc  CRITICAL  measured gpu0 ecc\n"
            "                    fix: fix gpu0 ecc\n"
            "path /x   SKIP      measured path /x\n");
}

Report rich_report() {
  Report r = report_of({row("shm", State::Ok), row("gemm gpu0 bf16", State::Critical, "gpu0 GEMM wrong"),
                        row("path /s", State::Warn, "", true)});
  r.checks[1].metrics.push_back({"ddx_health_gemm_tflops", 512.5, {{"device", "gpu0"}, {"dtype", "bf16"}}, true});
  r.checks[1].metrics.push_back({"ddx_health_gemm_wrong_elements", 1, {{"device", "gpu0"}}, false});
  return r;
}

TEST(HealthJson, RoundTripsEveryField) {
  const Report r = rich_report();
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["state"], "CRITICAL");
  EXPECT_EQ(j["exit_code"], 2);
  EXPECT_EQ(j["verdict"], verdict_line(r));
  EXPECT_EQ(j["drain_reason"], "ddx: gpu0 GEMM wrong");
  const Report back = report_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.host, "node-b");
  EXPECT_EQ(back.level, 2);
  EXPECT_EQ(back.device_model, r.device_model);
  EXPECT_EQ(back.started, r.started);
  EXPECT_DOUBLE_EQ(back.seconds, 12.34);
  ASSERT_EQ(back.checks.size(), 3u);
  EXPECT_TRUE(back.checks[2].skipped);
  EXPECT_EQ(back.checks[2].state, State::Warn);
  EXPECT_EQ(back.checks[1].reason, "gpu0 GEMM wrong");
  EXPECT_EQ(back.checks[1].remediation, "fix gemm gpu0 bf16");
  ASSERT_EQ(back.checks[1].metrics.size(), 2u);
  EXPECT_EQ(back.checks[1].metrics[0].labels.at("dtype"), "bf16");
  EXPECT_TRUE(back.checks[1].metrics[0].judged);
  EXPECT_FALSE(back.checks[1].metrics[1].judged);
  EXPECT_DOUBLE_EQ(back.checks[1].metrics[0].value, 512.5);
}

std::string error_of(const nlohmann::json& j) {
  try {
    report_from_json(j);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HealthJson, ErrorsNameTheKey) {
  const nlohmann::json good = to_json(rich_report());
  nlohmann::json j = good;
  j.erase("host");
  EXPECT_EQ(error_of(j), "host: missing");
  j = good;
  j["level"] = "two";
  EXPECT_EQ(error_of(j), "level: expected an integer, got string");
  j = good;
  j["checks"] = 3;
  EXPECT_EQ(error_of(j), "checks: expected an array, got number");
  j = good;
  j["checks"][1]["state"] = "BAD";
  EXPECT_EQ(error_of(j), "checks[1].state: unknown state \"BAD\" (expected OK, WARN, CRITICAL or UNKNOWN)");
  j = good;
  j["checks"][1].erase("name");
  EXPECT_EQ(error_of(j), "checks[1].name: missing");
  j = good;
  j["checks"][1]["metrics"][0]["value"] = "fast";
  EXPECT_EQ(error_of(j), "checks[1].metrics[0].value: expected a number, got string");
  j = good;
  j["checks"][1]["metrics"][1]["labels"]["device"] = 0;
  EXPECT_EQ(error_of(j), "checks[1].metrics[1].labels.device: expected a string");
  EXPECT_EQ(error_of(nlohmann::json::array()), "report: expected an object, got array");
}

TEST(HealthPrometheus, EveryCheckOverallStateTimesAndFiguresWithTheHostLabel) {
  const Report r = rich_report();
  const auto samples = parse_textfile(to_prometheus(r));
  for (const auto& s : samples) EXPECT_EQ(s.labels.at("host"), "node-b") << s.name;

  const auto states = named(samples, "ddx_health_check_state");
  ASSERT_EQ(states.size(), 3u);
  EXPECT_EQ(states[0].labels.at("check"), "shm");
  EXPECT_EQ(states[0].value, "0");
  EXPECT_EQ(states[1].labels.at("check"), "gemm gpu0 bf16");
  EXPECT_EQ(states[1].value, "2");
  const auto skipped = named(samples, "ddx_health_check_skipped");
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_EQ(skipped[2].value, "1");
  EXPECT_EQ(skipped[0].value, "0");

  const auto overall_state = named(samples, "ddx_health_state");
  ASSERT_EQ(overall_state.size(), 1u);
  EXPECT_EQ(overall_state[0].value, "2");
  EXPECT_EQ(overall_state[0].labels.at("level"), "2");
  ASSERT_EQ(named(samples, "ddx_health_seconds").size(), 1u);
  EXPECT_DOUBLE_EQ(std::stod(named(samples, "ddx_health_seconds")[0].value), 12.34);
  const auto start = named(samples, "ddx_health_start_time_seconds");
  ASSERT_EQ(start.size(), 1u);
  EXPECT_DOUBLE_EQ(std::stod(start[0].value), 1741064767.0);  // date -u -d 2025-03-04T05:06:07Z +%s

  const auto tflops = named(samples, "ddx_health_gemm_tflops");
  ASSERT_EQ(tflops.size(), 1u);
  EXPECT_EQ(tflops[0].labels.at("device"), "gpu0");
  EXPECT_EQ(tflops[0].labels.at("dtype"), "bf16");
  EXPECT_DOUBLE_EQ(std::stod(tflops[0].value), 512.5);
  EXPECT_EQ(named(samples, "ddx_health_gemm_wrong_elements").size(), 1u);
}

TEST(HealthPrometheus, LabelValuesAreEscapedAndNamesMadeLegal) {
  Report r = report_of({row("path C:\\dir \"quoted\"\nnext", State::Ok)});
  r.host = "we\"ird\\host";
  r.checks[0].metrics.push_back({"ddx-health free.bytes", 1e12, {{"path", "/a\"b"}, {"9bad-label", "v"}, {"host", "other"}}, false});
  const auto samples = parse_textfile(to_prometheus(r));
  const auto states = named(samples, "ddx_health_check_state");
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].labels.at("check"), "path C:\\dir \"quoted\"\nnext");
  EXPECT_EQ(states[0].labels.at("host"), "we\"ird\\host");
  const auto free = named(samples, "ddx_health_free_bytes");
  ASSERT_EQ(free.size(), 1u);
  EXPECT_EQ(free[0].labels.at("path"), "/a\"b");
  EXPECT_EQ(free[0].labels.at("_9bad_label"), "v");
  EXPECT_EQ(free[0].labels.at("exported_host"), "other");
  EXPECT_EQ(free[0].labels.at("host"), "we\"ird\\host");
}

TEST(HealthPrometheus, OneFamilyPerNameEvenWhenChecksInterleaveAndRepeatsDropped) {
  Report r = report_of({row("a", State::Ok), row("b", State::Ok), row("c", State::Ok)});
  r.checks[0].metrics.push_back({"ddx_health_x", 1, {{"device", "gpu0"}}, true});
  r.checks[1].metrics.push_back({"ddx_health_y", 2, {}, true});
  r.checks[2].metrics.push_back({"ddx_health_x", 3, {{"device", "gpu1"}}, true});
  r.checks[2].metrics.push_back({"ddx_health_x", 4, {{"device", "gpu1"}}, true});  // same series again
  const std::string text = to_prometheus(r);
  const auto samples = parse_textfile(text);  // fails on a split family or a repeated series
  const auto x = named(samples, "ddx_health_x");
  ASSERT_EQ(x.size(), 2u);
  EXPECT_EQ(x[1].value, "3");
}

TEST(HealthPrometheus, NoStartTimeWhenTheStartIsNotUtcIso) {
  Report r = report_of({row("a", State::Ok)});
  r.started = "yesterday";
  EXPECT_TRUE(named(parse_textfile(to_prometheus(r)), "ddx_health_start_time_seconds").empty());
  r.started = "2025-03-04T05:06:07.5Z";
  const auto start = named(parse_textfile(to_prometheus(r)), "ddx_health_start_time_seconds");
  ASSERT_EQ(start.size(), 1u);
  EXPECT_DOUBLE_EQ(std::stod(start[0].value), 1741064767.5);
}

}  // namespace
}  // namespace ddx::health
