// PyTorch's own flight-recorder dumps through `ddx analyze`'s loader and analysis: the real NCCL
// dumps in tests/fixtures/pytorch-fr/nccl (written by PyTorch on an H200; see its README), the
// same moment as pickle and as JSON, and damaged files, which must each be one named problem and
// never a crash. The Gloo jobs CI can run itself are in tests/dist/pytorch_fr_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "analyzer/diagnosis.h"
#include "analyzer/dump_loader.h"
#include "analyzer/entry_listing.h"
#include "analyzer/report.h"
#include "analyzer/timeline.h"
#include "ddx/errors/errors.h"
#include "ddx/watchdog/flight_recorder.h"

namespace ddx::analyze {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(DDX_SOURCE_DIR) + "/tests/fixtures/pytorch-fr/nccl/";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The same call read from two files: op, number, dtype and shape; `i` names the entry.
void expect_same_call(const Entry& a, const Entry& b, size_t i) {
  EXPECT_EQ(a.op, b.op) << i;
  EXPECT_EQ(a.seq, b.seq) << i;
  EXPECT_EQ(a.dtype, b.dtype) << i;
  EXPECT_EQ(a.in_shape, b.in_shape) << i;
}

class PytorchDump : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("ddx-pytorch-dump-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
  }
  std::string dir_;
};

TEST(PytorchDumpFixtures, HealthyPickleAndJsonReadAlikeAndFindNothing) {
  TraceSet pickle = load_traces({kFixtures + "healthy/explicit"});
  TraceSet json = load_traces({kFixtures + "healthy/explicit-json"});
  ASSERT_EQ(pickle.dumps.size(), 1u);
  ASSERT_EQ(json.dumps.size(), 1u);
  const RankDump& p = pickle.dumps.at(0);
  const RankDump& j = json.dumps.at(0);
  EXPECT_EQ(p.format, "pytorch 2.10");
  ASSERT_EQ(p.entries.size(), 21u);
  ASSERT_EQ(j.entries.size(), 21u);
  for (size_t i = 0; i < p.entries.size(); ++i) {
    expect_same_call(p.entries[i], j.entries[i], i);
    EXPECT_EQ(p.entries[i].group, j.entries[i].group) << i;
    EXPECT_EQ(p.entries[i].state, "completed") << i;
    EXPECT_EQ(p.entries[i].backend, "nccl") << i;
    // The pickle carries Python stacks, the JSON dump none.
    EXPECT_FALSE(p.entries[i].stack.empty()) << i;
    EXPECT_TRUE(j.entries[i].stack.empty()) << i;
  }
  // What the fixture's README lists: dtypes in ddx's spelling, the sub-group with its description.
  EXPECT_EQ(p.entries[0].op, "all_reduce");
  EXPECT_EQ(p.entries[0].dtype, "float32");
  EXPECT_EQ(p.entries[1].dtype, "bfloat16");
  EXPECT_EQ(p.entries[1].in_shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(p.entries[2].dtype, "float16");
  EXPECT_EQ(p.entries[3].dtype, "int32");
  EXPECT_EQ(p.entries[0].group, "0 (default_pg)");
  EXPECT_EQ(p.entries[0].group_ranks, std::vector<int>{0});
  EXPECT_EQ(p.entries[0].call_site.rfind("capture_nccl_dumps.py:", 0), 0u) << p.entries[0].call_site;
  bool subgroup = false, coalesced = false;
  for (const Entry& e : p.entries) {
    subgroup = subgroup || e.group == "1 (fixture_subgroup)";
    coalesced = coalesced || e.op == "coalesced";
  }
  EXPECT_TRUE(subgroup);
  EXPECT_TRUE(coalesced);
  EXPECT_TRUE(diagnose(pickle).findings.empty()) << render_text(pickle, diagnose(pickle));
  EXPECT_TRUE(diagnose(json).findings.empty()) << render_text(json, diagnose(json));
}

TEST(PytorchDumpFixtures, APointToPointBatchThatRanIsNotADeadlock) {
  // Inside batch_isend_irecv only the trailing coalesced entry is completed; the send and recv
  // before it stay "scheduled" and unretired although they ran (the fixture's README).
  for (const char* folder : {"healthy/explicit-after-p2p", "healthy/explicit-after-p2p-json"}) {
    TraceSet t = load_traces({kFixtures + folder});
    ASSERT_EQ(t.dumps.size(), 1u) << folder;
    int p2p = 0;
    for (const Entry& e : t.dumps.at(0).entries) {
      if (!e.p2p) continue;
      ++p2p;
      EXPECT_EQ(e.state, "completed") << folder << " " << e.op;
      EXPECT_EQ(e.peer, 0) << folder;
    }
    EXPECT_EQ(p2p, 2) << folder;
    Diagnosis dx = diagnose(t);
    EXPECT_TRUE(dx.findings.empty()) << render_text(t, dx);
  }
}

TEST(PytorchDumpFixtures, ASendWhoseReceiveWasNeverPostedNamesTheReceiver) {
  // Rank 0 blocked in send p2p#1 to rank 1; rank 1 never posted the recv and sits idle after
  // the last collective they shared (make_p2p_missing.py, from the real captures). torchfrtrace
  // names rank 1 "missing" in the send too.
  const std::string dir = std::string(DDX_SOURCE_DIR) + "/tests/fixtures/pytorch-fr/nccl-p2p-missing";
  TraceSet t = load_traces({dir});
  ASSERT_EQ(t.dumps.size(), 2u);
  const Entry& send = t.dumps.at(0).entries.back();
  EXPECT_TRUE(send.p2p);
  EXPECT_EQ(send.op, "send");
  EXPECT_EQ(send.peer_global(), 1);
  EXPECT_TRUE(send.in_flight());
  Diagnosis dx = diagnose(t);
  ASSERT_FALSE(dx.findings.empty()) << render_text(t, dx);
  const Finding& verdict = dx.findings.front();
  EXPECT_EQ(verdict.kind, FindingKind::StoppedPeer) << render_text(t, dx);
  EXPECT_EQ(verdict.culprits, std::vector<int>{1}) << render_text(t, dx);
  EXPECT_EQ(verdict.affected, std::vector<int>{0}) << render_text(t, dx);
  EXPECT_NE(verdict.summary.find("send p2p#1"), std::string::npos) << verdict.summary;
}

TEST(PytorchDumpFixtures, ATimedOutCollectiveIsNamedWithItsGroupAndStack) {
  // World of one: the all_reduce the blocked stream never ran, dumped by PyTorch on its timeout.
  TraceSet hang = load_traces({kFixtures + "hang"});
  Diagnosis dx = diagnose(hang);
  ASSERT_FALSE(dx.findings.empty()) << render_text(hang, dx);
  EXPECT_EQ(dx.findings[0].kind, FindingKind::Stuck);
  EXPECT_EQ(dx.findings[0].culprits, std::vector<int>{0});
  EXPECT_EQ(dx.findings[0].group, "0 (default_pg)");
  EXPECT_EQ(dx.findings[0].seq, 5u);
  EXPECT_EQ(dx.findings[0].op, "all_reduce");
  const std::string text = render_text(hang, dx);
  EXPECT_NE(text.find("rank 0's stack at all_reduce #5"), std::string::npos) << text;
  EXPECT_NE(text.find("capture_nccl_dumps.py"), std::string::npos) << text;
  // The same in a sub-group while the default group is healthy: the sub-group is named.
  TraceSet sub = load_traces({kFixtures + "hang_subgroup"});
  Diagnosis sdx = diagnose(sub);
  ASSERT_FALSE(sdx.findings.empty()) << render_text(sub, sdx);
  EXPECT_EQ(sdx.findings[0].kind, FindingKind::Stuck);
  EXPECT_EQ(sdx.findings[0].group, "1 (stuck_subgroup)");
  EXPECT_EQ(sdx.findings[0].seq, 2u);
  EXPECT_EQ(sdx.findings.size(), 1u) << render_text(sub, sdx);
}

// Format 2.2 (torch 2.4): no pg_status, no comm_lib_version, no thread fields
// (tests/fixtures/pytorch-fr/make_old_layout.py). The same verdicts as the 2.10 originals.
TEST(PytorchDumpFixtures, AnOlderFormatReadsToTheSameVerdicts) {
  const std::string old_layout = std::string(DDX_SOURCE_DIR) + "/tests/fixtures/pytorch-fr/nccl-v2.2/";
  for (const char* c : {"hang", "hang_subgroup", "healthy/explicit"}) {
    TraceSet older = load_traces({old_layout + c});
    TraceSet newer = load_traces({kFixtures + std::string(c)});
    ASSERT_EQ(older.dumps.size(), 1u) << c;
    EXPECT_EQ(older.dumps.at(0).format, "pytorch 2.2") << c;
    ASSERT_EQ(older.dumps.at(0).entries.size(), newer.dumps.at(0).entries.size()) << c;
    const Diagnosis a = diagnose(older), b = diagnose(newer);
    ASSERT_EQ(a.findings.size(), b.findings.size()) << c << render_text(older, a);
    for (size_t i = 0; i < a.findings.size(); ++i) {
      EXPECT_EQ(a.findings[i].kind, b.findings[i].kind) << c;
      EXPECT_EQ(a.findings[i].group, b.findings[i].group) << c;
      EXPECT_EQ(a.findings[i].seq, b.findings[i].seq) << c;
      EXPECT_EQ(a.findings[i].culprits, b.findings[i].culprits) << c;
    }
  }
}

TEST(PytorchDumpFixtures, ValidDumpsWithNoEntriesAreReadAndBlameNobody) {
  TraceSet t = load_traces({kFixtures + "two_rank_probe/explicit"});
  EXPECT_EQ(t.dumps.size(), 2u);
  EXPECT_TRUE(t.problems.empty());
  EXPECT_TRUE(diagnose(t).findings.empty());
}

TEST_F(PytorchDump, FilesPrefixAndMixedFormatsAreRead) {
  const std::string pickle = read_bytes(kFixtures + "hang_subgroup/nccl_trace_rank_0");
  write("nccl_trace_rank_0", pickle);
  write("other_name_1", pickle);
  write("README.md", "not a dump, and not named like one: ignored in a directory");
  // A prefix reads only the files it names.
  TraceSet only = load_traces({dir_}, "nccl_trace_rank_");
  EXPECT_EQ(only.dumps.size(), 1u);
  // Files given one by one, each format detected from its content.
  const std::string json = read_bytes(kFixtures + "healthy/explicit-json/nccl_trace_rank_0.json");
  write("trace_rank_3.json", json);
  TraceSet files = load_traces({dir_ + "/nccl_trace_rank_0", dir_ + "/trace_rank_3.json"});
  EXPECT_EQ(files.dumps.size(), 2u);
  EXPECT_EQ(files.dumps.at(3).format, "pytorch 2.10");
  EXPECT_THROW(load_traces({dir_ + "/nope"}), UsageError);
  EXPECT_THROW(load_traces({dir_}, "no_such_prefix_"), UsageError);
}

// A dump still being written (or one a killed rank left half-written) is the hidden temp file
// of an atomic write: not a dump of the rank its random suffix happens to end in.
TEST_F(PytorchDump, AnAtomicWritesTempFileIsNotADump) {
  const std::string json = read_bytes(kFixtures + "healthy/explicit-json/nccl_trace_rank_0.json");
  write("ddx-fr-rank0.json", json);
  write(".ddx-fr-rank0.json.tmp.FL5Hs7", json);
  TraceSet t = load_traces({dir_});
  EXPECT_EQ(t.dumps.size(), 1u);
  EXPECT_EQ(t.dumps.count(0), 1u);
  EXPECT_TRUE(t.problems.empty()) << t.problems.front().detail;
}

TEST_F(PytorchDump, BadFilesAreEachOneNamedProblemAndTheRestIsAnalyzed) {
  const std::string pickle = read_bytes(kFixtures + "hang_subgroup/nccl_trace_rank_0");
  write("nccl_trace_rank_0", pickle);
  write("nccl_trace_rank_1", "");                                     // empty
  write("nccl_trace_rank_2", pickle.substr(0, pickle.size() / 2));    // truncated pickle
  write("nccl_trace_rank_3", "{\"hello\": 1}");                       // JSON, not a dump
  write("nccl_trace_rank_4", std::string("\x80\x02garbage", 9));      // a pickle header, then junk
  write("nccl_trace_rank_5.json", pickle);                            // a second dump of rank 5 ...
  write("nccl_trace_rank_5", pickle);                                 // ... under two names
  TraceSet t = load_traces({dir_});
  std::map<int, std::string> problems;
  for (const DumpProblem& p : t.problems) problems[p.rank] += p.kind + ": " + p.detail + "\n";
  EXPECT_NE(problems[1].find("nccl_trace_rank_1: empty file"), std::string::npos) << problems[1];
  EXPECT_NE(problems[2].find("nccl_trace_rank_2: not a readable pickle"), std::string::npos) << problems[2];
  EXPECT_NE(problems[3].find("nccl_trace_rank_3: not a ddx flight recorder dump"), std::string::npos) << problems[3];
  EXPECT_NE(problems[4].find("not a readable pickle"), std::string::npos) << problems[4];
  EXPECT_NE(problems[5].find("a second dump of rank 5"), std::string::npos) << problems[5];
  for (const auto& [rank, text] : problems) EXPECT_EQ(text.find("\n"), text.size() - 1) << "one line each: " << text;
  EXPECT_EQ(t.dumps.count(0), 1u);
  EXPECT_EQ(t.dumps.count(5), 1u);
  EXPECT_NO_THROW(diagnose(t));
}

TEST_F(PytorchDump, TruncatedAndBitFlippedPicklesNeverCrashTheReader) {
  // Every cut of a real dump, and bytes flipped at random (fixed seed): each file is read or
  // named as a problem, never a crash, a hang or an escaping exception.
  const std::string pickle = read_bytes(kFixtures + "hang/nccl_trace_rank_0");
  ASSERT_GT(pickle.size(), 100u);
  int read = 0, refused = 0;
  auto check = [&](const std::string& bytes) {
    write("nccl_trace_rank_0", bytes);
    TraceSet t;
    ASSERT_NO_THROW(t = load_traces({dir_ + "/nccl_trace_rank_0"}));
    (t.dumps.empty() ? refused : read) += 1;
    ASSERT_NO_THROW(diagnose(t));
  };
  for (size_t cut = 0; cut < pickle.size(); cut += 7) check(pickle.substr(0, cut));
  std::mt19937 random(1234);
  for (int i = 0; i < 250; ++i) {
    std::string bytes = pickle;
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int f = 0; f < flips; ++f) bytes[random() % bytes.size()] ^= static_cast<char>(1 << (random() % 8));
    check(bytes);
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(read, 0);  // a flipped byte inside a string still reads
}

// A PyTorch JSON dump of `world` ranks (pg_config's default group), three completed all_reduces
// created `minutes_ago` minutes before now, written as PyTorch's JSON dump writes them.
std::string pytorch_json_dump(int world, double minutes_ago) {
  std::string members = "[";
  for (int r = 0; r < world; ++r) members += (r ? ", " : "") + std::to_string(r);
  members += "]";
  const int64_t now_ns = static_cast<int64_t>(unix_now_ms()) * 1000000;
  nlohmann::json doc = {{"version", "2.10"},
                        {"pg_config", {{"0", {{"name", "0"}, {"desc", "default_pg"}, {"ranks", members}}}}},
                        {"pg_status", nlohmann::json::object()},
                        {"entries", nlohmann::json::array()}};
  const nlohmann::json sizes = nlohmann::json::array({nlohmann::json::array({8})});
  const nlohmann::json dtypes = nlohmann::json::array({"Float"});
  for (int i = 0; i < 3; ++i) {
    doc["entries"].push_back({{"record_id", i}, {"pg_id", 0}, {"process_group", nlohmann::json::array({"0", "default_pg"})},
                              {"collective_seq_id", i + 1}, {"p2p_seq_id", 0}, {"op_id", i + 1},
                              {"profiling_name", "nccl:all_reduce"},
                              {"time_created_ns", now_ns - static_cast<int64_t>(minutes_ago * 60e9) + i * 1000000},
                              {"input_sizes", sizes}, {"input_dtypes", dtypes}, {"output_sizes", sizes},
                              {"output_dtypes", dtypes}, {"state", "completed"}, {"retired", true},
                              {"timeout_ms", 60000}, {"is_p2p", false}});
  }
  return doc.dump();
}

TEST_F(PytorchDump, RanksThatDisagreeOnAGroupsMembersAreNamed) {
  // Ranks 0-2 built group 1 ("tp") from all four ranks, rank 3 from ranks 2 and 3 only; each
  // waits in its first all_reduce there.
  for (int r = 0; r < 4; ++r) {
    nlohmann::json doc = nlohmann::json::parse(pytorch_json_dump(4, 1));
    const std::string members = r == 3 ? "[2, 3]" : "[0, 1, 2, 3]";
    doc["pg_config"]["1"] = {{"name", "1"}, {"desc", "tp"}, {"ranks", members}};
    nlohmann::json e = doc["entries"].back();
    e["record_id"] = 3;
    e["pg_id"] = 1;
    e["process_group"] = nlohmann::json::array({"1", "tp"});
    e["collective_seq_id"] = 1;
    e["state"] = "scheduled";
    e["retired"] = false;
    doc["entries"].push_back(e);
    write("nccl_trace_rank_" + std::to_string(r), doc.dump());
  }
  TraceSet t = load_traces({dir_});
  Diagnosis dx = diagnose(t);
  ASSERT_FALSE(dx.findings.empty()) << render_text(t, dx);
  const Finding& f = dx.findings.front();
  EXPECT_EQ(f.kind, FindingKind::MembershipMismatch) << render_text(t, dx);
  EXPECT_EQ(f.culprits, std::vector<int>{3});
  EXPECT_EQ(f.affected, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(f.group, "1 (tp)");
  const std::string text = render_text(t, dx);
  EXPECT_NE(text.find("rank 3 sees group 1 (tp) as ranks [2, 3]"), std::string::npos) << text;
  EXPECT_NE(text.find("ranks 0,1,2 see group 1 (tp) as ranks [0, 1, 2, 3]"), std::string::npos) << text;
}

TEST_F(PytorchDump, IndependentProblemsInTwoGroupsAreEachAFinding) {
  // Pairs [0,1] (group 1) and [2,3] (group 2): rank 1 never joins its pair's second all_reduce,
  // and ranks 2 and 3 all_reduce different sizes in theirs.
  for (int r = 0; r < 4; ++r) {
    nlohmann::json doc = nlohmann::json::parse(pytorch_json_dump(4, 1));
    const std::string pg = r < 2 ? "1" : "2";
    doc["pg_config"][pg] = {{"name", pg}, {"desc", "pair"}, {"ranks", r < 2 ? "[0, 1]" : "[2, 3]"}};
    nlohmann::json e = doc["entries"].back();
    e["pg_id"] = std::stoi(pg);
    e["process_group"] = nlohmann::json::array({pg, "pair"});
    const int ops = r == 0 ? 2 : 1;
    for (int seq = 1; seq <= ops; ++seq) {
      e["record_id"] = 2 + seq;
      e["collective_seq_id"] = seq;
      const bool last = seq == ops && r != 1;
      e["state"] = last ? "scheduled" : "completed";
      e["retired"] = !last;
      e["input_sizes"] = e["output_sizes"] = nlohmann::json::array({nlohmann::json::array({r == 3 ? 9 : 8})});
      doc["entries"].push_back(e);
    }
    write("nccl_trace_rank_" + std::to_string(r), doc.dump());
  }
  TraceSet t = load_traces({dir_});
  Diagnosis dx = diagnose(t);
  const std::string text = render_text(t, dx);
  ASSERT_EQ(dx.findings.size(), 2u) << text;
  std::map<std::string, const Finding*> by_group;
  for (const Finding& f : dx.findings) by_group[f.group] = &f;
  ASSERT_TRUE(by_group.count("1 (pair)")) << text;
  ASSERT_TRUE(by_group.count("2 (pair)")) << text;
  EXPECT_EQ(by_group["1 (pair)"]->culprits, std::vector<int>{1}) << text;
  EXPECT_EQ(by_group["2 (pair)"]->kind, FindingKind::SizeMismatch) << text;
}

TEST_F(PytorchDump, GroupsThatShareANameButNoRankAreNotADisagreement) {
  // split_group: ranks 0,1 and ranks 2,3 each have a group named "1"; no rank is in both.
  for (int r = 0; r < 4; ++r) {
    nlohmann::json doc = nlohmann::json::parse(pytorch_json_dump(4, 1));
    doc["pg_config"]["1"] = {{"name", "1"}, {"desc", "tp"}, {"ranks", r < 2 ? "[0, 1]" : "[2, 3]"}};
    nlohmann::json e = doc["entries"].back();
    e["record_id"] = 3;
    e["pg_id"] = 1;
    e["process_group"] = nlohmann::json::array({"1", "tp"});
    e["collective_seq_id"] = 1;
    doc["entries"].push_back(e);
    write("nccl_trace_rank_" + std::to_string(r), doc.dump());
  }
  TraceSet t = load_traces({dir_});
  ASSERT_EQ(t.dumps.at(0).groups.at("1 (tp)").ranks, (std::vector<int>{0, 1}));
  ASSERT_EQ(t.dumps.at(3).groups.at("1 (tp)").ranks, (std::vector<int>{2, 3}));
  Diagnosis dx = diagnose(t);
  EXPECT_TRUE(dx.findings.empty()) << render_text(t, dx);
}

TEST_F(PytorchDump, DumpsFromAnotherRunAreEachOneLineAndIgnored) {
  for (int r = 0; r < 4; ++r) {
    // Rank 1's file is yesterday's 2-rank job's; rank 3's is from 5 hours before the others'.
    write("nccl_trace_rank_" + std::to_string(r), pytorch_json_dump(r == 1 ? 2 : 4, r == 3 ? 300 + 1 : 1));
  }
  TraceSet t = load_traces({dir_});
  EXPECT_EQ(t.world_size, 4);
  EXPECT_EQ(t.dumps.size(), 2u);
  ASSERT_EQ(t.problems.size(), 2u);
  EXPECT_EQ(t.problems[0].rank, 1);
  EXPECT_EQ(t.problems[0].kind, "other-job");
  EXPECT_NE(t.problems[0].detail.find("its world group has 2 ranks, most dumps' 4"), std::string::npos)
      << t.problems[0].detail;
  EXPECT_EQ(t.problems[1].rank, 3);
  EXPECT_NE(t.problems[1].detail.find("dumped 5.0 h before most of the others"), std::string::npos)
      << t.problems[1].detail;
  // The same four as one run: nothing set aside.
  for (int r = 0; r < 4; ++r) write("nccl_trace_rank_" + std::to_string(r), pytorch_json_dump(4, 1));
  EXPECT_EQ(load_traces({dir_}).dumps.size(), 4u);
}

// ddx's recorder writing PyTorch's layout (DDX_FR_FORMAT=pytorch|both): the pickle decodes with
// LibTorch's unpickler into the same ops as ddx's JSON, and a folder of both reads as one dump
// per rank.
TEST_F(PytorchDump, DdxsPickleReadsLikeItsJson) {
  FlightRecorder fr(8);
  auto op = [&](uint64_t id, uint64_t seq, OpType type, OpState end, const std::string& site) {
    OpRecord r;
    r.id = id;
    r.group = "world";
    r.group_ranks = {0, 1, 2};
    r.seq = seq;
    r.op = type;
    r.dtype = "bfloat16";
    r.in_shape = r.out_shape = {4, 256};
    r.numel = 1024;
    r.backend = "gloo";
    r.call_site = site;
    r.t_enqueue_us = steady_now_us();
    fr.on_enqueue(r);
    r.state = OpState::Started;
    r.t_start_us = steady_now_us();
    fr.on_start(r);
    if (end == OpState::Started) return;
    r.state = end;
    r.t_end_us = steady_now_us();
    fr.on_end(r);
  };
  op(0, 1, OpType::AllReduce, OpState::Completed, "step 1 grads");
  op(1, 2, OpType::AllGather, OpState::Completed, "step 2 params");
  op(2, 3, OpType::Barrier, OpState::Completed, "");
  op(3, 4, OpType::AllReduce, OpState::Started, "step 3 grads");
  DumpContext c;
  c.rank = 1;
  c.world_size = 3;
  c.host = "node7";
  c.pid = 4242;
  c.job_id = "job-9";
  c.reason = "collective timeout";
  c.collective_timeout_ms = 2000;
  write_flight_recorder_dump(dir_, fr.snapshot(), c, DumpFormat::Both);
  const std::string pickle = dir_ + "/nccl_trace_rank_1";
  ASSERT_TRUE(fs::exists(pickle));
  ASSERT_TRUE(fs::exists(dir_ + "/ddx-fr-rank1.json"));

  TraceSet from_pickle = load_traces({pickle});
  TraceSet from_json = load_traces({dir_ + "/ddx-fr-rank1.json"});
  ASSERT_EQ(from_pickle.dumps.count(1), 1u);
  const RankDump& p = from_pickle.dumps.at(1);
  const RankDump& j = from_json.dumps.at(1);
  EXPECT_EQ(p.format, "pytorch 2.10, written by ddx");
  EXPECT_TRUE(p.written_by_ddx);
  EXPECT_EQ(p.host, "node7");
  EXPECT_EQ(p.pid, 4242);
  EXPECT_EQ(p.job_id, "job-9");
  EXPECT_EQ(p.world_size, 3);
  EXPECT_EQ(p.reason, "collective timeout");
  ASSERT_EQ(p.entries.size(), j.entries.size());
  for (size_t i = 0; i < p.entries.size(); ++i) {
    expect_same_call(p.entries[i], j.entries[i], i);
    EXPECT_EQ(p.entries[i].state, j.entries[i].state) << i;
    EXPECT_EQ(p.entries[i].group_ranks, j.entries[i].group_ranks) << i;
    EXPECT_EQ(p.entries[i].backend, "gloo") << i;
    EXPECT_EQ(p.entries[i].call_site, j.entries[i].call_site) << i;
    // Times survive the move to unix nanoseconds within two milliseconds.
    EXPECT_NEAR(p.dump_unix_ms * 1000.0 - (p.dump_steady_us - p.entries[i].enqueue_us),
                j.dump_unix_ms * 1000.0 - (j.dump_steady_us - j.entries[i].enqueue_us), 2000.0)
        << i;
  }
  EXPECT_EQ(p.entries[1].op, "all_gather");
  EXPECT_EQ(p.entries[2].op, "barrier");
  EXPECT_EQ(p.entries[3].state, "started");
  EXPECT_EQ(p.groups.at("world (default_pg)").last_completed, 3u);

  // Both files of one rank: one dump (the JSON), no warning.
  TraceSet both = load_traces({dir_});
  EXPECT_EQ(both.dumps.size(), 1u);
  EXPECT_EQ(both.dumps.at(1).format, "ddx");
  for (const DumpProblem& problem : both.problems) EXPECT_EQ(problem.kind, "missing") << problem.detail;
}

TEST(EntryListing, PgFiltersMatchNameOrDescription) {
  EXPECT_TRUE(group_matches("0 (default_pg)", {}));
  EXPECT_TRUE(group_matches("0 (default_pg)", {"0"}));
  EXPECT_TRUE(group_matches("0 (default_pg)", {"default_pg"}));
  EXPECT_TRUE(group_matches("1 (stuck_subgroup)", {"x", "stuck_subgroup"}));
  EXPECT_FALSE(group_matches("1 (stuck_subgroup)", {"0", "default_pg"}));
  EXPECT_TRUE(group_matches("tp/1", {"tp/1"}));
  EXPECT_FALSE(group_matches("tp/1", {"tp"}));
  EXPECT_TRUE(group_matches("world", {"default_pg"}));
  EXPECT_FALSE(group_matches("world", {"0"}));
}

TEST(EntryListing, SelectedRanksAndGroupsNarrowTheTables) {
  TraceSet t = load_traces({kFixtures + "hang_subgroup"});
  const std::string all = render_entries(t, {}, {});
  const std::string sub = render_entries(t, {0}, {"stuck_subgroup"});
  EXPECT_NE(all.find("0 (default_pg)"), std::string::npos) << all;
  EXPECT_EQ(sub.find("0 (default_pg)"), std::string::npos) << sub;
  EXPECT_NE(sub.find("2 of 7 entries"), std::string::npos) << sub;
  EXPECT_NE(sub.find("scheduled"), std::string::npos) << sub;
  EXPECT_EQ(render_entries(t, {5}, {}).find("rank 0"), std::string::npos);
}

// The Perfetto trace of the real NCCL hang: the stuck all_reduce is drawn to the dump, marked.
TEST(ChromeTrace, TheStuckCollectiveRunsToTheDumpAndTheCulpritIsMarked) {
  TraceSet t = load_traces({kFixtures + "hang"});
  Diagnosis dx = diagnose(t);
  ASSERT_FALSE(dx.findings.empty());
  const Timeline timeline = build_timeline(t, dx);
  const nlohmann::json doc = nlohmann::json::parse(render_chrome_trace(timeline));
  const std::string svg = render_timeline_svg(timeline);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("culprit"), std::string::npos);
  EXPECT_NE(svg.find("#f28e2b"), std::string::npos);  // the stuck all_reduce's bar
  int slices = 0, stuck = 0, verdicts = 0;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "collective") {
      ++slices;
      if (e.at("name").get<std::string>().find("(in flight)") != std::string::npos ||
          e.at("name").get<std::string>().find("(failed)") != std::string::npos) {
        ++stuck;
        EXPECT_GE(e.at("dur").get<int64_t>(), 9'000'000) << e.dump();  // its 10 s timeout
      }
    }
    if (e.at("ph") == "i") ++verdicts;
  }
  EXPECT_EQ(slices, 5);
  EXPECT_EQ(stuck, 1);
  EXPECT_EQ(verdicts, 1);
}

}  // namespace
}  // namespace ddx::analyze
