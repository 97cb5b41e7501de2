// PyTorch's own flight-recorder dumps through `ddx analyze`'s loader and analysis: the real NCCL
// dumps in tests/fixtures/pytorch-fr/nccl (written by PyTorch on an H200; see its README), the
// same moment as pickle and as JSON, and damaged files, which must each be one named problem and
// never a crash. The Gloo jobs CI can run itself are in tests/dist/pytorch_fr_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "analyzer/diagnosis.h"
#include "analyzer/dump_loader.h"
#include "analyzer/report.h"
#include "ddx/errors.h"

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
    EXPECT_EQ(p.entries[i].op, j.entries[i].op) << i;
    EXPECT_EQ(p.entries[i].seq, j.entries[i].seq) << i;
    EXPECT_EQ(p.entries[i].group, j.entries[i].group) << i;
    EXPECT_EQ(p.entries[i].dtype, j.entries[i].dtype) << i;
    EXPECT_EQ(p.entries[i].in_shape, j.entries[i].in_shape) << i;
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

}  // namespace
}  // namespace ddx::analyze
