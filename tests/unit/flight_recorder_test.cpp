// The flight recorder's ring buffer and dump, and the watchdog driven by a fake peer channel:
// timeouts, failures, requests from peers, SIGUSR2, dead peers, option parsing. No processes,
// no LibTorch.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ddx/errors/errors.h"
#include "ddx/watchdog/flight_recorder.h"
#include "ddx/watchdog/store_lost.h"
#include "ddx/watchdog/watchdog.h"

namespace ddx {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

OpRecord make_op(uint64_t id, uint64_t seq, const std::string& group = "world") {
  OpRecord r;
  r.id = id;
  r.group = group;
  r.group_ranks = {0, 1};
  r.seq = seq;
  r.op = OpType::AllReduce;
  r.reduce_op = "sum";
  r.dtype = "float32";
  r.in_shape = r.out_shape = {1024};
  r.numel = 1024;
  r.bytes = 4096;
  r.backend = "gloo";
  r.call_site = "step " + std::to_string(seq) + " grads";
  r.t_enqueue_us = steady_now_us();
  return r;
}

void run_op(FlightRecorder& fr, OpRecord r, OpState end = OpState::Completed) {
  fr.on_enqueue(r);
  r.state = OpState::Started;
  r.t_start_us = steady_now_us();
  fr.on_start(r);
  if (end == OpState::Scheduled || end == OpState::Started) return;
  r.state = end;
  r.t_end_us = steady_now_us();
  if (end == OpState::Failed) r.error = "Connection closed by peer";
  fr.on_end(r);
}

std::string scratch(const std::string& tag) {
  auto dir = std::filesystem::path(DDX_BINARY_DIR) / "test-scratch" /
             ("fr-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(FlightRecorder, RecordsStatesTimesAndGroupProgress) {
  FlightRecorder fr(8);
  run_op(fr, make_op(1, 1));
  run_op(fr, make_op(2, 2), OpState::Started);
  RecorderSnapshot s = fr.snapshot();
  ASSERT_EQ(s.entries.size(), 2u);
  EXPECT_EQ(s.entries[0].state, OpState::Completed);
  EXPECT_GT(s.entries[0].t_end_us, 0);
  EXPECT_EQ(s.entries[1].state, OpState::Started);
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].last_enqueued, 2u);
  EXPECT_EQ(s.groups[0].last_completed, 1u);
  EXPECT_EQ(s.groups[0].in_flight, 1);
  ASSERT_EQ(fr.in_flight().size(), 1u);
  EXPECT_EQ(fr.in_flight()[0].seq, 2u);
}

TEST(FlightRecorder, RingKeepsTheNewestEntries) {
  FlightRecorder fr(4);
  for (uint64_t i = 1; i <= 10; ++i) run_op(fr, make_op(i, i));
  RecorderSnapshot s = fr.snapshot();
  ASSERT_EQ(s.entries.size(), 4u);
  EXPECT_EQ(s.entries.front().seq, 7u);
  EXPECT_EQ(s.entries.back().seq, 10u);
  EXPECT_EQ(s.recorded_total, 10u);
  EXPECT_EQ(s.groups[0].last_completed, 10u);
}

TEST(FlightRecorder, FailureCallbackSeesFailedOps) {
  FlightRecorder fr(4);
  std::vector<uint64_t> failed;
  fr.set_failure_callback([&](const OpRecord& r) { failed.push_back(r.seq); });
  run_op(fr, make_op(1, 1));
  run_op(fr, make_op(2, 2), OpState::Failed);
  EXPECT_EQ(failed, std::vector<uint64_t>{2});
  EXPECT_EQ(fr.snapshot().entries[1].error, "Connection closed by peer");
}

TEST(FlightRecorder, DumpIsVersionedJsonWithOneEntryPerLine) {
  FlightRecorder fr(4);
  run_op(fr, make_op(1, 1));
  run_op(fr, make_op(2, 2), OpState::Started);
  DumpContext c;
  c.rank = 1;
  c.world_size = 2;
  c.host = "h";
  c.pid = 42;
  c.reason = "test";
  const std::string dir = scratch("dump");
  const std::string path = write_flight_recorder_dump(dir, fr.snapshot(), c);
  EXPECT_EQ(path, dir + "/ddx-fr-rank1.json");
  json doc = read_json(path);
  EXPECT_EQ(doc["format"], "ddx-flight-recorder");
  EXPECT_EQ(doc["version"], kFlightRecorderFormatVersion);
  EXPECT_EQ(doc["rank"], 1);
  EXPECT_EQ(doc["pid"], 42);
  EXPECT_EQ(doc["groups"]["world"]["last_enqueued"], 2);
  ASSERT_EQ(doc["entries"].size(), 2u);
  EXPECT_EQ(doc["entries"][1]["state"], "started");
  EXPECT_EQ(doc["entries"][0]["call_site"], "step 1 grads");
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 5);  // header, "entries":[ , 2 entries, ]}
}

// A PeerChannel in memory, shared by the "ranks" of a test.
struct FakeStore {
  std::mutex mutex;
  std::map<int, std::string> heartbeats;
  std::vector<std::string> requests;
  std::map<int64_t, int64_t> dumped;
  std::atomic<bool> broken{false};
  std::atomic<bool> lost{false};  // the connection broke: what the dist channel throws then
};

class FakeChannel : public PeerChannel {
 public:
  explicit FakeChannel(std::shared_ptr<FakeStore> s) : s_(std::move(s)) {}
  void publish_heartbeat(int rank, const std::string& payload) override {
    check();
    std::lock_guard<std::mutex> l(s_->mutex);
    s_->heartbeats[rank] = payload;
  }
  std::map<int, std::string> read_heartbeats(int) override {
    check();
    std::lock_guard<std::mutex> l(s_->mutex);
    return s_->heartbeats;
  }
  int64_t dump_generation() override {
    check();
    std::lock_guard<std::mutex> l(s_->mutex);
    return static_cast<int64_t>(s_->requests.size());
  }
  std::string dump_request(int64_t g) override {
    std::lock_guard<std::mutex> l(s_->mutex);
    return s_->requests.at(g - 1);
  }
  int64_t request_dump(const std::string& reason) override {
    check();
    std::lock_guard<std::mutex> l(s_->mutex);
    s_->requests.push_back(reason);
    return static_cast<int64_t>(s_->requests.size());
  }
  void mark_dumped(int64_t g) override {
    std::lock_guard<std::mutex> l(s_->mutex);
    ++s_->dumped[g];
  }
  int64_t dumped_count(int64_t g) override {
    std::lock_guard<std::mutex> l(s_->mutex);
    return s_->dumped[g];
  }

 private:
  void check() {
    if (s_->lost) throw StoreLost("the rendezvous store at h0:29500 (hosted by rank 0)", "the store closed the connection");
    if (s_->broken) throw std::runtime_error("Connection reset by peer");
  }
  std::shared_ptr<FakeStore> s_;
};

HangOptions fast_options(const std::string& dir) {
  HangOptions o;
  o.trace_dir = dir;
  o.collective_timeout = 300ms;
  o.tick = 20ms;
  o.heartbeat_interval = 30ms;
  o.dump_wait = 500ms;
  o.dump_on_sigterm = false;  // never touch the test runner's SIGTERM
  return o;
}

DumpContext identity(int rank, int world) {
  DumpContext c;
  c.rank = rank;
  c.world_size = world;
  c.host = "testhost";
  c.pid = static_cast<int>(::getpid());
  return c;
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 3000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

TEST(Watchdog, TimeoutDumpsAsksPeersAndAborts) {
  const std::string dir = scratch("timeout");
  auto store = std::make_shared<FakeStore>();
  FlightRecorder fr(16);
  Watchdog wd(fr, fast_options(dir), identity(1, 2), std::make_unique<FakeChannel>(store));
  std::atomic<int> exit_code{-1};
  wd.set_exit_function([&](int code) { exit_code = code; });
  wd.start();
  run_op(fr, make_op(1, 1));
  run_op(fr, make_op(2, 2), OpState::Started);  // never ends
  ASSERT_TRUE(eventually([&] { return exit_code.load() != -1; })) << "the watchdog did not fire";
  wd.stop();
  EXPECT_EQ(exit_code.load(), kExitWatchdog);
  json doc = read_json(dir + "/ddx-fr-rank1.json");
  EXPECT_NE(doc["reason"].get<std::string>().find("all_reduce(sum) #2 on group world"), std::string::npos)
      << doc["reason"];
  EXPECT_NE(doc["reason"].get<std::string>().find("has not finished"), std::string::npos);
  std::lock_guard<std::mutex> l(store->mutex);
  ASSERT_EQ(store->requests.size(), 1u);
  EXPECT_NE(store->requests[0].find("rank 1: all_reduce"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir + "/ddx-fr-request.json"));
}

TEST(Watchdog, DumpModeKeepsRunningAndFiresOncePerOp) {
  const std::string dir = scratch("dumpmode");
  FlightRecorder fr(16);
  HangOptions o = fast_options(dir);
  o.on_timeout = OnTimeout::Dump;
  Watchdog wd(fr, o, identity(0, 1), nullptr);
  std::atomic<int> exit_code{-1};
  wd.set_exit_function([&](int code) { exit_code = code; });
  wd.start();
  run_op(fr, make_op(1, 1), OpState::Started);
  ASSERT_TRUE(eventually([&] { return wd.fatal_events() == 1; }));
  std::this_thread::sleep_for(200ms);
  wd.stop();
  EXPECT_EQ(wd.fatal_events(), 1);
  EXPECT_EQ(exit_code.load(), -1);
  EXPECT_TRUE(std::filesystem::exists(dir + "/ddx-fr-rank0.json"));
}

TEST(Watchdog, FailedOpIsDumpedOnTheFailingThread) {
  const std::string dir = scratch("failed");
  FlightRecorder fr(16);
  HangOptions o = fast_options(dir);
  o.on_timeout = OnTimeout::Wait;
  Watchdog wd(fr, o, identity(0, 1), nullptr);
  wd.start();
  run_op(fr, make_op(1, 1), OpState::Failed);
  // Written before on_end returned: the caller's exception cannot outrun it.
  json doc = read_json(dir + "/ddx-fr-rank0.json");
  EXPECT_NE(doc["reason"].get<std::string>().find("failed: Connection closed by peer"), std::string::npos);
  ASSERT_TRUE(eventually([&] { return wd.fatal_events() == 1; }));
  wd.stop();
}

TEST(Watchdog, DumpsWhenAPeerAsksAndConfirms) {
  const std::string dir = scratch("request");
  auto store = std::make_shared<FakeStore>();
  FlightRecorder fr(16);
  Watchdog wd(fr, fast_options(dir), identity(1, 2), std::make_unique<FakeChannel>(store));
  wd.start();
  run_op(fr, make_op(1, 1));
  {
    std::lock_guard<std::mutex> l(store->mutex);
    store->requests.push_back("rank 0: all_reduce #2 has not finished");
  }
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> l(store->mutex);
    return store->dumped[1] == 1;
  }));
  wd.stop();
  json doc = read_json(dir + "/ddx-fr-rank1.json");
  EXPECT_EQ(doc["reason"], "requested by rank 0: all_reduce #2 has not finished");
  EXPECT_EQ(wd.fatal_events(), 0);
}

TEST(Watchdog, RequestFileReachesRanksWithoutAStore) {
  const std::string dir = scratch("requestfile");
  FlightRecorder fr(16);
  Watchdog wd(fr, fast_options(dir), identity(3, 4), nullptr);
  wd.start();
  std::this_thread::sleep_for(50ms);
  json request = {{"rank", 0}, {"unix_ms", unix_now_ms()}, {"request", "rank 0: store gone"}};
  std::ofstream(dir + "/ddx-fr-request.json") << request.dump();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir + "/ddx-fr-rank3.json"); }));
  wd.stop();
  EXPECT_NE(read_json(dir + "/ddx-fr-rank3.json")["reason"].get<std::string>().find("store gone"),
            std::string::npos);
}

TEST(Watchdog, Sigusr2DumpsAndTrainingContinues) {
  const std::string dir = scratch("usr2");
  FlightRecorder fr(16);
  Watchdog wd(fr, fast_options(dir), identity(0, 1), nullptr);
  wd.start();
  run_op(fr, make_op(1, 1));
  ::raise(SIGUSR2);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir + "/ddx-fr-rank0.json"); }));
  wd.stop();
  EXPECT_NE(read_json(dir + "/ddx-fr-rank0.json")["reason"].get<std::string>().find("SIGUSR2"),
            std::string::npos);
  EXPECT_EQ(wd.fatal_events(), 0);
}

TEST(Watchdog, RankZeroDeclaresAPeerWithAStoppedHeartbeatDead) {
  const std::string dir = scratch("deadpeer");
  auto store = std::make_shared<FakeStore>();
  {
    std::lock_guard<std::mutex> l(store->mutex);
    store->heartbeats[1] = R"({"n": 7, "host": "h1", "pid": 9, "groups": {"world": [3, 3, 2, 1, 0, 0]}, "op": ""})";
  }
  FlightRecorder fr(16);
  HangOptions o = fast_options(dir);
  o.on_timeout = OnTimeout::Dump;
  o.heartbeat_timeout = 200ms;
  Watchdog wd(fr, o, identity(0, 2), std::make_unique<FakeChannel>(store));
  wd.start();
  ASSERT_TRUE(eventually([&] { return wd.fatal_events() == 1; }));
  wd.stop();
  json doc = read_json(dir + "/ddx-fr-rank0.json");
  EXPECT_NE(doc["reason"].get<std::string>().find("rank 1's heartbeat stopped"), std::string::npos) << doc["reason"];
  EXPECT_EQ(doc["peers"]["declared_dead"], json::array({1}));
  EXPECT_EQ(doc["peers"]["ranks"]["1"]["heartbeat"]["host"], "h1");
}

TEST(Watchdog, LostStoreIsReportedAsRankZeroGone) {
  const std::string dir = scratch("loststore");
  auto store = std::make_shared<FakeStore>();
  store->broken = true;
  FlightRecorder fr(16);
  HangOptions o = fast_options(dir);
  o.on_timeout = OnTimeout::Dump;
  o.heartbeat_timeout = 150ms;
  Watchdog wd(fr, o, identity(2, 4), std::make_unique<FakeChannel>(store));
  wd.start();
  ASSERT_TRUE(eventually([&] { return wd.fatal_events() == 1; }));
  wd.stop();
  json doc = read_json(dir + "/ddx-fr-rank2.json");
  EXPECT_NE(doc["reason"].get<std::string>().find("rank 0 is probably dead"), std::string::npos) << doc["reason"];
  EXPECT_GT(doc["peers"]["store_failing_ms"].get<int64_t>(), 0);
}

// A broken connection is not a slow store: every rank, the host's own included, stops at once
// with one line naming the store, its host and since when, long before the heartbeat timeout.
TEST(Watchdog, BrokenStoreConnectionStopsEveryRankAtOnceInOneLine) {
  for (int rank : {0, 2}) {
    const std::string dir = scratch("storelost" + std::to_string(rank));
    auto store = std::make_shared<FakeStore>();
    FlightRecorder fr(16);
    HangOptions o = fast_options(dir);
    o.heartbeat_timeout = 60s;
    Watchdog wd(fr, o, identity(rank, 4), std::make_unique<FakeChannel>(store));
    std::atomic<int> exit_code{-1};
    wd.set_exit_function([&](int code) { exit_code = code; });
    wd.start();
    std::this_thread::sleep_for(100ms);  // a few healthy heartbeats first
    EXPECT_EQ(wd.fatal_events(), 0);
    store->lost = true;
    ASSERT_TRUE(eventually([&] { return exit_code.load() != -1; })) << "rank " << rank << " did not stop";
    wd.stop();
    EXPECT_EQ(exit_code.load(), kExitWatchdog);
    EXPECT_EQ(wd.fatal_events(), 1);
    const std::string reason = read_json(dir + "/ddx-fr-rank" + std::to_string(rank) + ".json")["reason"];
    EXPECT_EQ(reason.rfind("the rendezvous store at h0:29500 (hosted by rank 0) is unreachable since ", 0), 0u) << reason;
    EXPECT_NE(reason.find(" (the store closed the connection)"), std::string::npos) << reason;
    EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
  }
}

TEST(WatchdogSummary, GroupsRanksByPositionAndMarksTheOnesBehind) {
  std::map<int, std::string> hb = {
      {0, R"({"n":1,"idle_ms":5,"groups":{"world":[4,4,3,1,0,0]}})"},
      {1, R"({"n":1,"idle_ms":5,"groups":{"world":[4,4,3,1,0,0]}})"},
      {2, R"({"n":1,"idle_ms":2100,"groups":{"world":[3,3,3,0,0,0]}})"},
  };
  EXPECT_EQ(desync_summary("world", hb, 4, 1'000'000),
            "group world: ranks 0,1 at #4 (in flight); rank 2 at #3 (done, idle 2.1 s) <- behind; rank 3: no heartbeat");
}

// A lost node, as the ranks left see it: the heartbeats of its ranks stopped coming (they come
// from a thread, so compute alone does not stop them); named with their host.
TEST(WatchdogSummary, RanksWhoseHeartbeatStoppedAreNamedWithTheirHost) {
  const int64_t now = 1'000'000;
  std::map<int, std::string> hb = {
      {0, R"({"n":9,"host":"node6","unix_ms":999500,"interval_ms":1000,"idle_ms":5,"groups":{"world":[40,40,39,1,0,0]}})"},
      {1, R"({"n":9,"host":"node6","unix_ms":999700,"interval_ms":1000,"idle_ms":5,"groups":{"world":[40,40,39,1,0,0]}})"},
      {2, R"({"n":7,"host":"node7","unix_ms":991900,"interval_ms":1000,"idle_ms":5,"groups":{"world":[39,39,38,1,0,0]}})"},
      {3, R"({"n":7,"host":"node7","unix_ms":992000,"interval_ms":1000,"idle_ms":5,"groups":{"world":[39,39,38,1,0,0]}})"},
  };
  EXPECT_EQ(desync_summary("world", hb, 4, now),
            "group world: ranks 0,1 at #40 (in flight); ranks 2,3 at #39 (in flight) <- behind; ranks 2,3 (node7) "
            "silent for 8.1 s: their host may be down, or the processes stopped");
  // Three intervals is the bar when the interval is long: 8.1 s is then not silence.
  for (auto& [rank, text] : hb) text.replace(text.find("\"interval_ms\":1000"), 18, "\"interval_ms\":3000");
  EXPECT_EQ(desync_summary("world", hb, 4, now).find("silent"), std::string::npos);
}

TEST(HangOptions, ParsesFlagsAndVariablesAndNamesBadOnes) {
  EXPECT_EQ(parse_duration("--timeout", "2s"), 2000ms);
  EXPECT_EQ(parse_duration("--timeout", "500ms"), 500ms);
  EXPECT_EQ(parse_duration("--timeout", "1.5"), 1500ms);
  EXPECT_EQ(parse_duration("--timeout", "2m"), 120000ms);
  EXPECT_THROW(parse_duration("--timeout", "soon"), UsageError);
  EXPECT_THROW(parse_duration("--timeout", "-1s"), UsageError);
  try {
    parse_duration("DDX_COLLECTIVE_TIMEOUT", "5 sec");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DDX_COLLECTIVE_TIMEOUT='5 sec'"), std::string::npos);
  }
  EXPECT_EQ(parse_on_timeout("--on-timeout", "wait"), OnTimeout::Wait);
  EXPECT_THROW(parse_on_timeout("--on-timeout", "explode"), UsageError);
  HangOptions o = hang_options_from_env({{"DDX_TRACE_DIR", "/t"},
                                         {"DDX_COLLECTIVE_TIMEOUT", "30s"},
                                         {"DDX_ON_TIMEOUT", "dump"},
                                         {"DDX_FR_BUFFER_SIZE", "100"},
                                         {"DDX_CHECK_COLLECTIVES", "1"}});
  EXPECT_EQ(o.trace_dir, "/t");
  EXPECT_EQ(o.collective_timeout, 30000ms);
  EXPECT_EQ(o.on_timeout, OnTimeout::Dump);
  EXPECT_EQ(o.buffer_size, 100u);
  EXPECT_TRUE(o.check_collectives);
  EXPECT_THROW(hang_options_from_env({{"DDX_FR_BUFFER_SIZE", "0"}}), UsageError);
  EXPECT_EQ(o.dump_format, DumpFormat::Ddx);
  EXPECT_EQ(hang_options_from_env({{"DDX_FR_FORMAT", "both"}}).dump_format, DumpFormat::Both);
  EXPECT_EQ(hang_options_from_env({{"DDX_FR_FORMAT", "pytorch"}}).dump_format, DumpFormat::PyTorch);
  try {
    hang_options_from_env({{"DDX_FR_FORMAT", "pickle"}});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DDX_FR_FORMAT='pickle'"), std::string::npos);
  }
}

TEST(FlightRecorder, PyTorchLayoutIsAPickleWithPyTorchsKeys) {
  FlightRecorder fr(4);
  run_op(fr, make_op(1, 1));
  DumpContext c;
  c.rank = 0;
  c.world_size = 2;
  const std::string dir = scratch("pytorch-layout");
  EXPECT_EQ(write_flight_recorder_dump(dir, fr.snapshot(), c, DumpFormat::PyTorch), dir + "/nccl_trace_rank_0");
  EXPECT_FALSE(std::filesystem::exists(dir + "/ddx-fr-rank0.json"));
  std::ifstream in(dir + "/nccl_trace_rank_0", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 3u);
  EXPECT_EQ(bytes.substr(0, 2), std::string("\x80\x02", 2));  // pickle protocol 2
  EXPECT_EQ(bytes.back(), '.');                                  // STOP
  for (const char* key : {"version", "2.10", "pg_config", "default_pg", "entries", "collective_seq_id",
                          "profiling_name", "nccl:all_reduce", "time_created_ns", "retired", "frames"}) {
    EXPECT_NE(bytes.find(key), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace ddx
