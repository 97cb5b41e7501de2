// `ddx analyze` on hand-written dumps: every finding kind, majority and tie-breaking (never
// "rank 0 is right"), and the damaged inputs users send in: missing, truncated, garbage,
// another run's, another format version.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "analyzer/diagnosis.h"
#include "analyzer/dump_loader.h"
#include "analyzer/report.h"
#include "ddx/errors/errors.h"

namespace ddx::analyze {
namespace {

using nlohmann::json;

// One rank's dump, written in the recorder's layout (header line, one entry per line).
struct DumpBuilder {
  int rank = 0;
  int world = 2;
  std::string job = "job1";
  std::string reason = "test";
  int64_t now_us = 100'000'000;  // the dump's steady clock
  std::vector<json> entries;
  json peers = json::object();
  uint64_t next_id = 1;
  std::string group = "world";  // of every op

  DumpBuilder(int r, int w) : rank(r), world(w) {}

  std::vector<int> all() const {
    std::vector<int> v;
    for (int i = 0; i < world; ++i) v.push_back(i);
    return v;
  }
  // A collective on group world. state: completed | started | failed.
  DumpBuilder& op(uint64_t seq, const std::string& name, const std::string& site,
                  const std::string& state = "completed", std::vector<int64_t> shape = {1024},
                  const std::string& dtype = "float32", const std::string& error = "") {
    const int64_t t = now_us - 10'000'000 + static_cast<int64_t>(seq) * 100'000;
    entries.push_back({{"id", next_id++}, {"group", group}, {"group_ranks", all()}, {"seq", seq},
                       {"p2p", false}, {"op", name}, {"reduce_op", name == "all_reduce" ? "sum" : ""},
                       {"dtype", dtype}, {"in_shape", shape}, {"out_shape", shape}, {"numel", shape[0]},
                       {"bytes", shape[0] * 4}, {"peer", -1}, {"backend", "gloo"}, {"call_site", site},
                       {"state", state}, {"error", error}, {"enqueue_us", t}, {"start_us", t},
                       {"end_us", state == "completed" || state == "failed" ? t + 1000 : 0}});
    return *this;
  }
  DumpBuilder& p2p(uint64_t seq, const std::string& name, int peer, const std::string& site,
                   const std::string& state = "completed") {
    const int64_t t = now_us - 5'000'000 + static_cast<int64_t>(seq) * 100'000;
    entries.push_back({{"id", next_id++}, {"group", group}, {"group_ranks", all()}, {"seq", seq},
                       {"p2p", true}, {"op", name}, {"reduce_op", ""}, {"dtype", "float32"},
                       {"in_shape", {256}}, {"out_shape", {256}}, {"numel", 256}, {"bytes", 1024},
                       {"peer", peer}, {"backend", "gloo"}, {"call_site", site}, {"state", state},
                       {"error", ""}, {"enqueue_us", t}, {"start_us", t},
                       {"end_us", state == "completed" ? t + 1000 : 0}});
    return *this;
  }
  std::string text() const {
    json groups = json::object();
    uint64_t enq = 0, done = 0, p2p_enq = 0;
    int in_flight = 0;
    for (const json& e : entries) {
      if (e["p2p"]) {
        p2p_enq = std::max(p2p_enq, e["seq"].get<uint64_t>());
      } else {
        enq = std::max(enq, e["seq"].get<uint64_t>());
        if (e["state"] == "completed") done = std::max(done, e["seq"].get<uint64_t>());
      }
      if (e["state"] == "started") ++in_flight;
    }
    groups[group] = {{"ranks", all()}, {"last_enqueued", enq}, {"last_started", enq}, {"last_completed", done},
                       {"last_enqueued_p2p", p2p_enq}, {"last_completed_p2p", 0}, {"in_flight", in_flight}};
    nlohmann::ordered_json head = {{"format", "ddx-flight-recorder"}, {"version", 1}, {"rank", rank},
                                   {"local_rank", rank}, {"world_size", world}, {"host", "node" + std::to_string(rank)},
                                   {"pid", 1000 + rank}, {"job_id", job}, {"reason", reason},
                                   {"triggers", json::array()}, {"dump_unix_ms", 1'700'000'000'000},
                                   {"dump_steady_us", now_us}, {"heartbeat_unix_ms", 1'700'000'000'000},
                                   {"last_event_unix_ms", 1'700'000'000'000}, {"collective_timeout_ms", 2000},
                                   {"capacity", 2000}, {"recorded_total", entries.size()}, {"groups", groups},
                                   {"peers", peers}};
    std::string out = head.dump();
    out.pop_back();
    out += ",\n\"entries\":[";
    for (size_t i = 0; i < entries.size(); ++i) out += (i ? ",\n" : "\n") + entries[i].dump();
    return out + "\n]}\n";
  }
};

class AnalyzerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(DDX_BINARY_DIR) / "test-scratch" /
            ("analyzer-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
             std::to_string(::getpid())))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void write(const DumpBuilder& b) { write_text(b.rank, b.text()); }
  void write_text(int rank, const std::string& text) {
    std::ofstream(dir_ + "/ddx-fr-rank" + std::to_string(rank) + ".json") << text;
  }
  Diagnosis run() {
    traces_ = load_trace_dir(dir_);
    return diagnose(traces_);
  }
  // Steps 1..n of "step k grads" all-reduces, all completed.
  static DumpBuilder steps(int rank, int world, int n) {
    DumpBuilder b(rank, world);
    for (int k = 1; k <= n; ++k) b.op(k, "all_reduce", "step " + std::to_string(k) + " grads");
    return b;
  }
  std::string dir_;
  TraceSet traces_;
};

TEST_F(AnalyzerTest, HealthyRunReportsNoProblem) {
  for (int r = 0; r < 4; ++r) write(steps(r, 4, 5));
  Diagnosis dx = run();
  EXPECT_TRUE(dx.findings.empty()) << render_text(traces_, dx);
  EXPECT_EQ(verdict_line(traces_, dx), "no problem found");
  ASSERT_EQ(dx.ranks.size(), 4u);
  EXPECT_NE(render_text(traces_, dx).find("every one completed #1..#5"), std::string::npos);
}

// The culprit skipped step 3's all-reduce: its #3 is step 4's all-reduce, and the others wait
// in #4 (step 4) for it.
TEST_F(AnalyzerTest, SkippedCollectiveNamesTheRankThatSkippedAtTwoAndFourRanks) {
  for (int world : {2, 4}) {
    for (int culprit = 0; culprit < world; ++culprit) {
      SetUp();
      for (int r = 0; r < world; ++r) {
        DumpBuilder b(r, world);
        if (r == culprit) {
          b.op(1, "all_reduce", "step 1 grads").op(2, "all_reduce", "step 2 grads")
              .op(3, "all_reduce", "step 4 grads");
        } else {
          b.op(1, "all_reduce", "step 1 grads").op(2, "all_reduce", "step 2 grads")
              .op(3, "all_reduce", "step 3 grads").op(4, "all_reduce", "step 4 grads", "started");
        }
        write(b);
      }
      Diagnosis dx = run();
      ASSERT_FALSE(dx.findings.empty()) << world << " ranks, culprit " << culprit;
      const Finding& f = dx.findings[0];
      EXPECT_EQ(f.kind, FindingKind::SkippedCollective) << render_text(traces_, dx);
      EXPECT_EQ(f.culprits, std::vector<int>{culprit}) << render_text(traces_, dx);
      EXPECT_EQ(f.op, "all_reduce");
      EXPECT_EQ(f.seq, 3u);
      EXPECT_EQ(f.call_site, "step 3 grads");
      EXPECT_NE(verdict_line(traces_, dx).find("rank " + std::to_string(culprit) + " (node"), std::string::npos);
    }
  }
}

TEST_F(AnalyzerTest, StragglerNeverJoinedWhileTheOthersWait) {
  for (int culprit : {0, 3}) {
    SetUp();
    for (int r = 0; r < 4; ++r) {
      DumpBuilder b = steps(r, 4, 2);
      if (r != culprit) b.op(3, "all_reduce", "step 3 grads", "started");
      write(b);
    }
    Diagnosis dx = run();
    ASSERT_FALSE(dx.findings.empty());
    EXPECT_EQ(dx.findings[0].kind, FindingKind::NeverJoined) << render_text(traces_, dx);
    EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{culprit});
    EXPECT_EQ(dx.findings[0].seq, 3u);
    EXPECT_NE(dx.findings[0].decided_by.find("majority"), std::string::npos);
  }
}

TEST_F(AnalyzerTest, OpMismatchIsDecidedByMajorityNotByRankZero) {
  // Rank 0 is the odd one out: an analyzer trusting rank 0 would blame the other three.
  for (int r = 0; r < 4; ++r) {
    DumpBuilder b = steps(r, 4, 2);
    if (r == 0) {
      b.op(3, "all_gather", "step 3 grads", "started");
    } else {
      b.op(3, "all_reduce", "step 3 grads", "started");
    }
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  EXPECT_EQ(f.kind, FindingKind::OpMismatch);
  EXPECT_EQ(f.culprits, std::vector<int>{0});
  EXPECT_EQ(f.op, "all_gather");
  EXPECT_EQ(f.expected_op, "all_reduce");
  EXPECT_NE(f.decided_by.find("3 of 4"), std::string::npos) << f.decided_by;
}

TEST_F(AnalyzerTest, TwoRankTieIsBrokenByWhoChangedAtTheSameCallSite) {
  for (int culprit : {0, 1}) {
    SetUp();
    for (int r = 0; r < 2; ++r) {
      DumpBuilder b = steps(r, 2, 2);
      b.op(3, r == culprit ? "all_gather" : "all_reduce", "step 3 grads", "started");
      write(b);
    }
    Diagnosis dx = run();
    ASSERT_FALSE(dx.findings.empty());
    EXPECT_EQ(dx.findings[0].kind, FindingKind::OpMismatch);
    EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{culprit}) << render_text(traces_, dx);
    EXPECT_NE(dx.findings[0].decided_by.find("no majority"), std::string::npos);
  }
}

// Without a majority or any history to tell the sides apart, the verdict names no rank, and the
// text and the JSON say the same.
TEST_F(AnalyzerTest, TieWithoutHistoryIsUndecidedAndNamesNoRank) {
  for (int r = 0; r < 2; ++r) {
    DumpBuilder b(r, 2);
    b.op(1, r == 0 ? "all_reduce" : "broadcast", "init", "started");
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  EXPECT_EQ(f.kind, FindingKind::OpMismatch);
  EXPECT_TRUE(f.culprits.empty()) << render_text(traces_, dx);
  EXPECT_EQ(f.affected, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.decided_by.rfind("undecided: no majority (1 vs 1)", 0), 0u) << f.decided_by;
  EXPECT_EQ(verdict_line(traces_, dx),
            "VERDICT: op-mismatch: ranks disagree on #1 on group world: rank 0 called all_reduce(sum) (at 'init'), "
            "rank 1 called broadcast (at 'init'); nothing shows which side changed [culprit: undecided]");
  json doc = json::parse(render_json(traces_, dx));
  EXPECT_EQ(doc["verdict"]["culprits"], json::array());
  EXPECT_EQ(doc["verdict"]["op"], "");
  EXPECT_EQ(doc["verdict"]["expected_op"], "");
}

// A PyTorch job as the loader leaves its dumps: each rank's collectives on group "0", one per
// Python line of train.py (31 and 32 all_reduce, 33 barrier, all called from train_step, which
// main's loop calls), the stacks PyTorch recorded, the last call of each rank still in flight.
TraceSet pytorch_job(const std::vector<std::vector<int>>& lines_by_rank) {
  TraceSet t;
  t.dir = "job";
  t.world_size = static_cast<int>(lines_by_rank.size());
  std::vector<int> members;
  for (int r = 0; r < t.world_size; ++r) members.push_back(r);
  for (int r = 0; r < t.world_size; ++r) {
    RankDump& d = t.dumps[r];
    d.rank = r;
    d.world_size = t.world_size;
    d.format = "pytorch 2.10";
    d.dump_steady_us = 100'000'000;
    const std::vector<int>& lines = lines_by_rank[r];
    for (size_t i = 0; i < lines.size(); ++i) {
      Entry e;
      e.id = e.seq = i + 1;
      e.group = "0";
      e.group_ranks = members;
      e.op = lines[i] == 33 ? "barrier" : "all_reduce";
      e.dtype = "float32";
      if (e.op == "all_reduce") e.in_shape = e.out_shape = {8};
      e.backend = "gloo";
      e.state = i + 1 == lines.size() ? "started" : "completed";
      const std::string torch_frame = e.op == "barrier" ? "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:5030 in barrier"
                                                        : "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:3068 in all_reduce";
      e.stack = std::vector<std::string>{torch_frame, "/job/train.py:" + std::to_string(lines[i]) + " in train_step",
                                         "/job/train.py:40 in main", "/job/train.py:44 in <module>"};
      e.call_site = "train.py:" + std::to_string(lines[i]) + " train_step";
      e.enqueue_us = e.start_us = 90'000'000 + static_cast<int64_t>(i) * 100'000;
      d.entries.push_back(e);
    }
    GroupPosition& pos = d.groups["0"];
    pos.ranks = members;
    pos.last_enqueued = pos.last_started = lines.size();
    pos.last_completed = lines.size() - 1;
    pos.in_flight = 1;
  }
  return t;
}

// The first `calls` calls of train.py's loop, each step 31, 32, 33; `skipping` leaves out the
// rest of step `at` after its first all_reduce and goes on with the next step.
std::vector<int> train_py_lines(int at, bool skipping, size_t calls) {
  std::vector<int> lines;
  for (int step = 0; lines.size() < calls; ++step) {
    for (int line : {31, 32, 33}) {
      if (skipping && step == at && line != 31) continue;
      if (lines.size() < calls) lines.push_back(line);
    }
  }
  return lines;
}

// Issue 44: at 2 ranks, rank 1 skips the rest of step 3 (its all_reduce at line 32 and the
// barrier). Its #11 is step 4's first all_reduce, which completes against rank 0's line-32 one;
// at #12 rank 0 waits in the barrier and rank 1 in line 32's all_reduce. Without a majority,
// rank 1's own order of calls (31 twice in a row, never so before) names it, not rank 0.
TEST(TwoRankPytorchJob, TheRankThatLeftItsOrderOfCallsIsTheCulpritAndTextAndJsonAgree) {
  TraceSet t = pytorch_job({train_py_lines(3, false, 12), train_py_lines(3, true, 12)});
  Diagnosis dx = diagnose(t);
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  const std::string text = render_text(t, dx);
  EXPECT_EQ(f.kind, FindingKind::OpMismatch) << text;
  EXPECT_EQ(f.culprits, std::vector<int>{1}) << text;
  EXPECT_EQ(f.affected, std::vector<int>{0}) << text;
  EXPECT_EQ(f.seq, 12u);
  EXPECT_EQ(verdict_line(t, dx),
            "VERDICT: op-mismatch: rank 1 called all_reduce as #12 on group 0 (at 'train.py:32 train_step') "
            "where the others called barrier [culprit: rank 1]");
  EXPECT_EQ(f.decided_by,
            "no majority (1 vs 1); rank 1 left the order of calls its earlier steps repeat: all_reduce #10 at "
            "'train.py:31 train_step' from 'train.py:40 main' was followed by all_reduce #11 at 'train.py:31 "
            "train_step' from 'train.py:40 main', as never before; rank 0 kept to it");
  json doc = json::parse(render_json(t, dx));
  EXPECT_EQ(doc["verdict"]["culprits"], json::array({1}));
  EXPECT_EQ(doc["verdict"]["op"], "all_reduce");
  EXPECT_EQ(doc["verdict"]["expected_op"], "barrier");
  // The same fault at 3 ranks is the majority's to decide, as before.
  TraceSet three = pytorch_job({train_py_lines(3, false, 12), train_py_lines(3, true, 12),
                                train_py_lines(3, false, 12)});
  Diagnosis dx3 = diagnose(three);
  ASSERT_FALSE(dx3.findings.empty());
  EXPECT_EQ(dx3.findings[0].culprits, std::vector<int>{1}) << render_text(three, dx3);
  EXPECT_NE(dx3.findings[0].decided_by.find("majority: ranks 0,2 called barrier (2 of 3)"), std::string::npos)
      << dx3.findings[0].decided_by;
}

// The same skip in the job's first step: neither rank has an earlier step to compare with, so
// nothing decides; the verdict says so and names no rank.
TEST(TwoRankPytorchJob, ASkipInTheFirstStepIsUndecided) {
  TraceSet t = pytorch_job({train_py_lines(0, false, 3), train_py_lines(0, true, 3)});
  Diagnosis dx = diagnose(t);
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  const std::string text = render_text(t, dx);
  EXPECT_EQ(f.kind, FindingKind::OpMismatch) << text;
  EXPECT_TRUE(f.culprits.empty()) << text;
  EXPECT_EQ(f.decided_by.rfind("undecided: ", 0), 0u) << f.decided_by;
  EXPECT_NE(text.find("VERDICT: op-mismatch: ranks disagree on #3 on group 0: rank 0 called barrier (at "
                      "'train.py:33 train_step'), rank 1 called all_reduce (at 'train.py:32 train_step'); nothing "
                      "shows which side changed [culprit: undecided]"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("'s stack at"), std::string::npos) << text;  // no culprit, no culprit's stack
  json doc = json::parse(render_json(t, dx));
  EXPECT_EQ(doc["verdict"]["culprits"], json::array());
  EXPECT_EQ(doc["verdict"]["op"], "");
}

TEST_F(AnalyzerTest, SizeAndDtypeMismatches) {
  for (int r = 0; r < 3; ++r) {
    DumpBuilder b = steps(r, 3, 1);
    b.op(2, "all_reduce", "step 2 grads", "started", r == 2 ? std::vector<int64_t>{1000} : std::vector<int64_t>{1024});
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  EXPECT_EQ(dx.findings[0].kind, FindingKind::SizeMismatch);
  EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{2});
  EXPECT_NE(dx.findings[0].summary.find("[1000]"), std::string::npos) << dx.findings[0].summary;

  SetUp();
  for (int r = 0; r < 3; ++r) {
    DumpBuilder b = steps(r, 3, 1);
    b.op(2, "all_reduce", "step 2 grads", "started", {1024}, r == 1 ? "bfloat16" : "float32");
    write(b);
  }
  dx = run();
  ASSERT_FALSE(dx.findings.empty());
  EXPECT_EQ(dx.findings[0].kind, FindingKind::DtypeMismatch);
  EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{1});
}

TEST_F(AnalyzerTest, P2PDeadlockBothSendingNamesTheRankThatChangedOrder) {
  // Steps 1-2: rank 0 sends first, rank 1 receives first. Step 3: rank 1 sends first too.
  for (int r = 0; r < 2; ++r) {
    DumpBuilder b(r, 2);
    uint64_t seq = 1;
    for (int step = 1; step <= 2; ++step) {
      const std::string site = "step " + std::to_string(step) + " exchange";
      if (r == 0) {
        b.p2p(seq++, "send", 1, site).p2p(seq++, "recv", 1, site);
      } else {
        b.p2p(seq++, "recv", 0, site).p2p(seq++, "send", 0, site);
      }
      b.op(step, "all_reduce", "step " + std::to_string(step) + " grads");
    }
    b.p2p(seq, "send", 1 - r, "step 3 exchange", "started");
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  EXPECT_EQ(f.kind, FindingKind::P2PDeadlock) << render_text(traces_, dx);
  EXPECT_EQ(f.culprits, std::vector<int>{1});
  EXPECT_EQ(f.op, "send");
  EXPECT_NE(f.summary.find("both sending"), std::string::npos);
}

TEST_F(AnalyzerTest, P2PDeadlockStillFoundWhenOneSideFailedAfterWaitingOutTheTimeout) {
  // Both receive; rank 0 gives up first (timeout, abort) and rank 1's recv then fails with
  // "Connection closed by peer" before its last dump: still a deadlock, not a mystery failure.
  for (int r = 0; r < 2; ++r) {
    DumpBuilder b(r, 2);
    uint64_t seq = 1;
    for (int step = 1; step <= 2; ++step) {
      const std::string site = "step " + std::to_string(step) + " exchange";
      if (r == 0) {
        b.p2p(seq++, "send", 1, site).p2p(seq++, "recv", 1, site);
      } else {
        b.p2p(seq++, "recv", 0, site).p2p(seq++, "send", 0, site);
      }
    }
    b.p2p(seq, "recv", 1 - r, "step 3 exchange", r == 0 ? "started" : "failed");
    if (r == 1) b.entries.back()["end_us"] = b.entries.back()["enqueue_us"].get<int64_t>() + 2'100'000;
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  EXPECT_EQ(dx.findings[0].kind, FindingKind::P2PDeadlock) << render_text(traces_, dx);
  EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{0});
  EXPECT_NE(dx.findings[0].summary.find("both receiving"), std::string::npos);
}

// A pipeline (`--strategy pp`, group "<mesh>.pp.<i>"), 4 stages, one micro-batch per step. Step 1
// ran every hop; in step 2 stage 2 stopped before its first one. Ranks 1 and 3 wait on it, rank
// 0 waits on rank 1: only rank 2 has nothing in flight, and the verdict names it, its stage,
// and what each neighbour waits for.
DumpBuilder pipeline_rank(int r, bool stage_2_stopped) {
  DumpBuilder b(r, 4);
  b.group = "pp4xdp1.pp.0";
  uint64_t seq = 1;
  auto hop = [&](int step, bool forward, const std::string& op, int peer, const std::string& state = "completed") {
    b.p2p(seq++, op, peer, "step " + std::to_string(step) + " micro 0 " + (forward ? "forward" : "backward") +
                               " stage " + std::to_string(r),
          state);
  };
  for (int step = 1; step <= 2; ++step) {
    b.op(step, "barrier", "step " + std::to_string(step));
    const bool stopped = step == 2 && stage_2_stopped;
    if (stopped && r == 2) break;
    const std::string waiting = stopped ? "started" : "completed";
    if (r > 0) hop(step, true, "recv", r - 1, stopped && r == 3 ? waiting : "completed");
    if (stopped && r == 3) break;
    if (r < 3) hop(step, true, "send", r + 1, stopped && r == 1 ? waiting : "completed");
    if (r < 3) hop(step, false, "recv", r + 1, stopped && r <= 1 ? waiting : "completed");
    if (stopped) break;
    if (r > 0) hop(step, false, "send", r - 1);
  }
  return b;
}

TEST_F(AnalyzerTest, StoppedPipelineStageIsNamedWithWhatItsNeighboursWaitFor) {
  for (int r = 0; r < 4; ++r) write(pipeline_rank(r, true));
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  const std::string text = render_text(traces_, dx);
  EXPECT_EQ(f.kind, FindingKind::StoppedPeer) << text;
  EXPECT_EQ(f.culprits, std::vector<int>{2}) << text;
  EXPECT_EQ(f.affected, (std::vector<int>{1, 3})) << text;
  EXPECT_EQ(dx.findings.size(), 1u) << text;  // rank 1 waits too, but on rank 2
  EXPECT_NE(f.summary.find("rank 2 (pipeline stage 2) stopped"), std::string::npos) << f.summary;
  EXPECT_NE(f.summary.find("rank 1 (pipeline stage 1) waits in recv"), std::string::npos) << f.summary;
  EXPECT_NE(f.summary.find("for micro-batch 0's gradient from stage 2"), std::string::npos) << f.summary;
  EXPECT_NE(f.summary.find("rank 3 (pipeline stage 3) waits in recv"), std::string::npos) << f.summary;
  EXPECT_NE(f.summary.find("for micro-batch 0's activation from stage 2"), std::string::npos) << f.summary;
}

TEST_F(AnalyzerTest, PipelineRankThatNeverJoinedIsNamedWithItsStage) {
  // Stage 1 stops at the start of step 3 (a hang fault): the others wait in the step's barrier
  // on the pipeline group. Its stage is known from the hops of the steps before.
  for (int r = 0; r < 4; ++r) {
    DumpBuilder b = pipeline_rank(r, false);
    if (r != 1) b.op(3, "barrier", "step 3", "started");
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  EXPECT_EQ(f.kind, FindingKind::NeverJoined) << render_text(traces_, dx);
  EXPECT_EQ(f.culprits, std::vector<int>{1});
  EXPECT_NE(f.summary.find("rank 1 never joined barrier #3 on group pp4xdp1.pp.0"), std::string::npos) << f.summary;
  EXPECT_NE(f.summary.find("; rank 1 is pipeline stage 1"), std::string::npos) << f.summary;
}

TEST_F(AnalyzerTest, DeadRankWithoutDumpIsNamedFromItsPeersEvidence) {
  for (int r : {0, 2, 3}) {
    DumpBuilder b = steps(r, 4, 2);
    b.op(3, "all_reduce", "step 3 grads", r == 0 ? "failed" : "started", {1024}, "float32",
         "[gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:4711");
    if (r == 0) {
      b.peers = {{"ranks", {{"1", {{"silent_ms", 900}, {"heartbeat", {{"host", "node1"}, {"pid", 1001},
                                                                      {"groups", {{"world", {3, 3, 2, 1, 0, 0}}}}}}}}}}};
    }
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  const Finding& f = dx.findings[0];
  EXPECT_EQ(f.kind, FindingKind::DeadRank) << render_text(traces_, dx);
  EXPECT_EQ(f.culprits, std::vector<int>{1});
  EXPECT_EQ(f.op, "all_reduce");
  EXPECT_EQ(f.seq, 3u);
  const std::string text = render_text(traces_, dx);
  EXPECT_NE(text.find("Connection closed by peer"), std::string::npos) << text;
  EXPECT_NE(text.find("host node1, pid 1001"), std::string::npos) << text;
}

TEST_F(AnalyzerTest, MissingDumpWithoutEvidenceIsReportedAsSuch) {
  for (int r : {0, 1}) {
    DumpBuilder b = steps(r, 3, 1);
    b.op(2, "all_reduce", "step 2 grads", "started");
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  EXPECT_EQ(dx.findings[0].kind, FindingKind::NoDump);
  EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{2});
  EXPECT_EQ(traces_.missing, std::vector<int>{2});
  EXPECT_NE(render_text(traces_, dx).find("rank 2: missing dump"), std::string::npos);
}

// Issue 44: "rank 1 wait for it". A verb after a rank list agrees with it.
TEST_F(AnalyzerTest, VerbsAgreeWithTheRanksBeforeThem) {
  for (int world : {2, 3}) {
    SetUp();
    for (int r = 0; r + 1 < world; ++r) {  // the last rank left no dump
      DumpBuilder b = steps(r, world, 1);
      b.op(2, "all_reduce", "step 2 grads", "started");
      write(b);
    }
    Diagnosis dx = run();
    ASSERT_FALSE(dx.findings.empty());
    EXPECT_EQ(dx.findings[0].kind, FindingKind::NoDump);
    const std::string waiting = world == 2 ? "; rank 0 waits for it in " : "; ranks 0,1 wait for it in ";
    EXPECT_NE(dx.findings[0].summary.find(waiting), std::string::npos) << dx.findings[0].summary;
  }
  // Rank 1 is still inside #2 while rank 0 waits in #3.
  SetUp();
  DumpBuilder ahead = steps(0, 2, 2);
  ahead.op(3, "all_reduce", "step 3 grads", "started");
  write(ahead);
  DumpBuilder stuck = steps(1, 2, 1);
  stuck.op(2, "all_reduce", "step 2 grads", "started");
  write(stuck);
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  EXPECT_EQ(dx.findings[0].kind, FindingKind::Stuck) << render_text(traces_, dx);
  EXPECT_NE(dx.findings[0].summary.find(") while rank 0 waits in all_reduce(sum) #3"), std::string::npos)
      << dx.findings[0].summary;
}

TEST_F(AnalyzerTest, ExtraCollectiveOnAMinorityOfRanks) {
  // PyTorch's FR tutorial: one rank runs one all-reduce more than the rest.
  for (int r = 0; r < 4; ++r) {
    DumpBuilder b = steps(r, 4, 4);
    if (r == 2) b.op(5, "all_reduce", "extra", "started");
    write(b);
  }
  Diagnosis dx = run();
  ASSERT_FALSE(dx.findings.empty());
  EXPECT_EQ(dx.findings[0].kind, FindingKind::ExtraCollective);
  EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{2});
}

TEST_F(AnalyzerTest, TruncatedDumpIsSalvagedAndReported) {
  DumpBuilder b0 = steps(0, 2, 2);
  b0.op(3, "all_reduce", "step 3 grads", "started");
  write(b0);
  DumpBuilder b1 = steps(1, 2, 2);
  b1.op(3, "all_reduce", "step 3 grads", "started");
  const std::string full = b1.text();
  write_text(1, full.substr(0, full.rfind("\"state\"")));  // cut inside the last entry
  Diagnosis dx = run();
  ASSERT_EQ(traces_.dumps.count(1), 1u);
  EXPECT_TRUE(traces_.dumps.at(1).truncated);
  EXPECT_EQ(traces_.dumps.at(1).entries.size(), 2u);
  bool reported = false;
  for (const auto& p : traces_.problems) reported = reported || (p.rank == 1 && p.kind == "truncated");
  EXPECT_TRUE(reported);
  EXPECT_NE(render_text(traces_, dx).find("rank 1: truncated dump"), std::string::npos);
}

TEST_F(AnalyzerTest, GarbageEmptyForeignAndFutureDumpsAreNamedNotFatal) {
  write(steps(0, 6, 2));
  write(steps(1, 6, 2));
  write_text(2, "");
  write_text(3, "{\"format\": \"ddx-flight-recorder\", \"version\": 99}");
  write_text(4, "\x89PNG...");
  DumpBuilder other = steps(5, 6, 2);
  other.job = "job0";  // an earlier run that used the same directory
  write(other);
  Diagnosis dx = run();
  std::map<int, std::string> kinds;
  for (const auto& p : traces_.problems) kinds[p.rank] = p.kind + ": " + p.detail;
  EXPECT_NE(kinds[2].find("empty file"), std::string::npos) << kinds[2];
  EXPECT_NE(kinds[3].find("version 99"), std::string::npos) << kinds[3];
  EXPECT_NE(kinds[4].find("not valid JSON"), std::string::npos) << kinds[4];
  EXPECT_NE(kinds[5].find("other-job"), std::string::npos) << kinds[5];
  EXPECT_EQ(traces_.missing, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(traces_.job_id, "job1");
}

TEST_F(AnalyzerTest, EmptyOrMissingDirectoryIsAUsageError) {
  EXPECT_THROW(load_trace_dir(dir_), UsageError);
  EXPECT_THROW(load_trace_dir(dir_ + "/nope"), UsageError);
  // An empty folder is most often a PyTorch job that never called the dump: the one line says so.
  try {
    load_trace_dir(dir_);
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no flight recorder dumps in it"), std::string::npos) << message;
    EXPECT_NE(message.find("on Gloo, only the latter"), std::string::npos) << message;
    EXPECT_NE(message.find("docs/analyze-pytorch.md section 1"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST_F(AnalyzerTest, JsonReportCarriesTheVerdict) {
  for (int r = 0; r < 2; ++r) {
    DumpBuilder b = steps(r, 2, 2);
    if (r == 0) b.op(3, "all_reduce", "step 3 grads", "started");
    write(b);
  }
  Diagnosis dx = run();
  json doc = json::parse(render_json(traces_, dx));
  EXPECT_TRUE(doc["problem_found"].get<bool>());
  EXPECT_EQ(doc["verdict"]["kind"], "never-joined");
  EXPECT_EQ(doc["verdict"]["culprits"], json::array({1}));
  EXPECT_EQ(doc["verdict"]["culprit_hosts"], json::array({"node1"}));
  // The line itself, not what the code that made it makes again (issue 46, item 8).
  EXPECT_EQ(doc["verdict_line"],
            "VERDICT: never-joined: rank 1 never joined all_reduce(sum) #3 on group world ('step 3 grads'), idle 9.80 s "
            "since #2 ended [culprit: rank 1 (node1, pid 1001)]");
  EXPECT_EQ(doc["verdict_line"].get<std::string>().rfind("VERDICT: never-joined: rank 1 ", 0), 0u);
  EXPECT_EQ(doc["ranks"].size(), 2u);
}

TEST(CallSites, StepNumbersAreNormalized) {
  EXPECT_EQ(detail::normalize_call_site("step 12 backward bucket 3"), "step # backward bucket #");
  EXPECT_EQ(detail::normalize_call_site("init"), "init");
}

}  // namespace
}  // namespace ddx::analyze
