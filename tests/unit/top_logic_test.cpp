// `ddx top`'s logic without processes: the strict nvidia-smi parser on recorded outputs (good,
// hung, malformed), the hosts file, the alarms from heartbeats fed at given times, the node
// alarms, the event log and the NVML loader's "no NVML" branch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "ddx/errors/errors.h"
#include "ddx/watchdog/watchdog.h"
#include "top/event_log.h"
#include "top/job_monitor.h"
#include "top/node_stats.h"
#include "top/smi_parse.h"
#include "top/ssh_hosts.h"
#include "top/top_render.h"

namespace ddx::top {
namespace {

using nlohmann::json;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(DDX_SOURCE_DIR) + "/tests/unit/data/nvidia-smi/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SmiParse, BusyNodeCountsEveryGpuAndProcess) {
  const SmiResult r = parse_smi_output(fixture("busy-8gpu.stdout"));
  EXPECT_TRUE(r.malformed.empty()) << r.malformed.front();
  ASSERT_EQ(r.gpus.size(), 8u);
  EXPECT_EQ(r.processes, 8);
  EXPECT_EQ(r.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(r.gpus[0].power_w, 695.12);
  EXPECT_DOUBLE_EQ(r.gpus[6].util_pct, 98);
  EXPECT_EQ(r.gpus[7].index, 7);
  EXPECT_EQ(r.gpus[3].memory_total_bytes, int64_t{81559} * 1024 * 1024);
}

TEST(SmiParse, MalformedLinesAreReportedAndNeverCounted) {
  const SmiResult r = parse_smi_output(fixture("malformed.stdout"));
  ASSERT_EQ(r.gpus.size(), 3u);  // GPUs 0, 2 and 5; not the banner, the comma'd name or the error
  EXPECT_EQ(r.gpus[0].index, 0);
  EXPECT_EQ(r.gpus[1].index, 2);
  EXPECT_EQ(r.gpus[2].index, 5);
  EXPECT_EQ(r.gpus[1].util_pct, -1);  // [N/A] is "not reported", not malformed
  EXPECT_EQ(r.gpus[1].power_w, -1);
  EXPECT_EQ(r.processes, 3);  // the NVML error line is no process
  ASSERT_EQ(r.malformed.size(), 5u);
  EXPECT_NE(r.malformed[0].find("line 1 'Warning: Permanently added"), std::string::npos) << r.malformed[0];
  EXPECT_NE(r.malformed[1].find("expected 7 fields, got 8"), std::string::npos) << r.malformed[1];
  EXPECT_NE(r.malformed[2].find("Unable to determine"), std::string::npos) << r.malformed[2];
  EXPECT_NE(r.malformed[3].find("line 6"), std::string::npos) << r.malformed[3];
  EXPECT_NE(r.malformed[4].find("Failed to initialize NVML"), std::string::npos) << r.malformed[4];
  EXPECT_NE(r.malformed[4].find("not a process id"), std::string::npos) << r.malformed[4];
}

TEST(SmiParse, AFailedQueryIsReportedNotEmpty) {
  // ssh's error went to stderr: stdout is empty, and that is said, not read as zero GPUs.
  const SmiResult r = parse_smi_output("");
  EXPECT_TRUE(r.gpus.empty());
  EXPECT_FALSE(r.complete);
  ASSERT_EQ(r.malformed.size(), 1u);
  EXPECT_NE(r.malformed[0].find("did not run"), std::string::npos);
  // The stderr fixture is what poll_hosts keeps apart; parsed as stdout it is rejected whole.
  EXPECT_TRUE(parse_smi_output(fixture("ssh-refused.stderr")).gpus.empty());
}

TEST(SmiParse, NumbersMustBeWholeFields) {
  const SmiResult r = parse_smi_output("0, GPU, 100, 12x, 700, 1, 2\n1, GPU, 101, 1, 700, 1, 2\nddx-top-compute-apps\n12 13\n");
  EXPECT_TRUE(r.gpus.empty());
  EXPECT_EQ(r.processes, 0);
  ASSERT_EQ(r.malformed.size(), 3u);
  EXPECT_NE(r.malformed[0].find("power.draw '12x' is not a number"), std::string::npos) << r.malformed[0];
  EXPECT_NE(r.malformed[1].find("above 100"), std::string::npos) << r.malformed[1];
}

TEST(HostsFile, CommentsAndBlankLinesAreSkippedBadLinesNamed) {
  const std::string path = ::testing::TempDir() + "/hosts";
  std::ofstream(path) << "# cluster\ngpu001\n\n  gpu002  # rack 2\n";
  EXPECT_EQ(read_hosts_file(path), (std::vector<std::string>{"gpu001", "gpu002"}));
  std::ofstream(path) << "gpu001\ngpu002 gpu003\n";
  try {
    read_hosts_file(path);
    FAIL() << "accepted two hosts on a line";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--hosts " + path + " line 2: 'gpu002 gpu003' is not one host name");
  }
  std::ofstream(path) << "# nothing\n";
  EXPECT_THROW(read_hosts_file(path), UsageError);
}

// A heartbeat as the watchdog writes it (heartbeat_payload), with its clock set by the test.
struct FakeRank {
  int rank = 0;
  uint64_t counter = 0;
  int64_t unix_ms = 0;
  uint64_t world_seq = 0;
  bool in_flight = false;
  TrainProgress train;
};

std::string heartbeat(const FakeRank& f, int world_size) {
  DumpContext me;
  me.rank = f.rank;
  me.world_size = world_size;
  me.host = "node" + std::to_string(f.rank / 2);
  me.pid = 1000 + f.rank;
  RecorderSnapshot s;
  GroupProgress g;
  g.group = "world";
  g.last_enqueued = f.world_seq;
  g.last_started = f.world_seq;
  g.last_completed = f.in_flight ? f.world_seq - 1 : f.world_seq;
  g.in_flight = f.in_flight ? 1 : 0;
  s.groups.push_back(g);
  OpRecord op;
  op.group = "world";
  op.seq = f.world_seq;
  op.op = OpType::AllReduce;
  op.reduce_op = "sum";
  op.dtype = "float32";
  op.in_shape = {1024};
  op.state = f.in_flight ? OpState::Started : OpState::Completed;
  std::vector<OpRecord> in_flight;
  if (f.in_flight) in_flight.push_back(op);
  json doc = json::parse(heartbeat_payload(f.counter, me, s, in_flight, op, f.train, std::chrono::milliseconds(1000)));
  doc["unix_ms"] = f.unix_ms;
  return doc.dump();
}

// Four ranks stepping every 100 ms of compute; `advance` moves one rank by one refresh.
struct Job {
  std::vector<FakeRank> ranks;
  explicit Job(int n) {
    for (int r = 0; r < n; ++r) ranks.push_back({r, 1, 0, 1, false, {}});
  }
  void advance(int r, int64_t now, double compute_s, double wait_s, int steps = 10) {
    FakeRank& f = ranks[r];
    ++f.counter;
    f.unix_ms = now;
    f.world_seq += 3 * steps;
    f.train.step += steps;
    f.train.total_step_s += steps * (compute_s + wait_s);
    f.train.total_comm_wait_s += steps * wait_s;
    f.train.step_ms = (compute_s + wait_s) * 1e3;
    f.train.comm_wait_ms = wait_s * 1e3;
    f.train.tokens_per_s = 1000 / (compute_s + wait_s);
  }
  std::map<int, std::string> read() const {
    std::map<int, std::string> out;
    for (const FakeRank& f : ranks) out[f.rank] = heartbeat(f, static_cast<int>(ranks.size()));
    return out;
  }
};

Screen observe(JobMonitor& m, const Job& job, int poll, int64_t now) {
  Screen s;
  s.poll = poll;
  s.unix_ms = now;
  m.observe_job(job.read(), static_cast<int>(job.ranks.size()), now, now, s);
  return s;
}

std::vector<std::string> kinds(const Screen& s) {
  std::vector<std::string> out;
  for (const Alarm& a : s.alarms) out.push_back(a.kind + "/" + std::to_string(a.rank));
  return out;
}

TEST(JobMonitor, AHealthyJobRaisesNothing) {
  JobMonitor m({});
  Job job(4);
  for (int poll = 1; poll <= 6; ++poll) {
    const int64_t now = poll * 1000;
    for (int r = 0; r < 4; ++r) job.advance(r, now, 0.1 + 0.002 * r, 0.01);
    const Screen s = observe(m, job, poll, now);
    EXPECT_TRUE(s.alarms.empty()) << poll << ": " << s.alarms.front().message;
    ASSERT_EQ(s.ranks.size(), 4u);
    EXPECT_EQ(s.ranks[2].step, 10 * poll);
    EXPECT_EQ(s.ranks[2].host, "node1");
  }
}

TEST(JobMonitor, AFrozenRankIsNamedWithItsLastCollectiveAfterTheStallTime) {
  JobMonitor m({});
  Job job(4);
  for (int r = 0; r < 4; ++r) job.advance(r, 1000, 0.1, 0.01);
  observe(m, job, 1, 1000);
  // Rank 2 freezes (SIGSTOP) after its heartbeat at 1000 ms; the others go on, waiting in
  // the next all_reduce.
  std::vector<std::vector<std::string>> seen;
  for (int poll = 2; poll <= 4; ++poll) {
    const int64_t now = poll * 1000;
    for (int r : {0, 1, 3}) {
      job.ranks[r].counter++;
      job.ranks[r].unix_ms = now;
      job.ranks[r].in_flight = true;
    }
    seen.push_back(kinds(observe(m, job, poll, now)));
  }
  EXPECT_TRUE(seen[0].empty());  // 1 s old: a heartbeat interval, not a stall
  EXPECT_TRUE(seen[1].empty());  // exactly the stall time (2 s): not yet
  ASSERT_EQ(seen[2], std::vector<std::string>{"stalled/2"});
  const Screen s = observe(m, job, 5, 5000);
  ASSERT_FALSE(s.alarms.empty());
  const std::string& msg = s.alarms[0].message;
  EXPECT_NE(msg.find("rank 2 (node1 pid 1002) stalled: no heartbeat for 4.0 s while ranks 0,1,3 go on"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("last collective all_reduce(sum) #31 on group world"), std::string::npos) << msg;
  EXPECT_TRUE(s.ranks[2].stalled);
  EXPECT_FALSE(s.ranks[0].stalled);
}

TEST(JobMonitor, OneReadFlagsAnOldHeartbeat) {
  // `ddx top --once`: no history, the heartbeat's own time decides.
  JobMonitor m({});
  Job job(3);
  for (int r = 0; r < 3; ++r) job.advance(r, 10000, 0.1, 0.01);
  job.ranks[1].unix_ms = 6500;
  EXPECT_EQ(kinds(observe(m, job, 1, 10000)), std::vector<std::string>{"stalled/1"});
}

TEST(JobMonitor, ASilentJobIsNotBlamedOnOneRank) {
  JobMonitor m({});
  Job job(2);
  for (int r = 0; r < 2; ++r) job.advance(r, 1000, 0.1, 0.01);
  observe(m, job, 1, 1000);
  EXPECT_EQ(kinds(observe(m, job, 2, 9000)), std::vector<std::string>{"silent/-1"});
}

TEST(JobMonitor, TheRankShortOfTheCollectiveTheOthersWaitInIsBehind) {
  JobMonitor m({});
  Job job(4);
  for (int r = 0; r < 4; ++r) job.advance(r, 1000, 0.1, 0.01);
  observe(m, job, 1, 1000);
  // Rank 3 spins outside collectives (heartbeat alive); the others wait in the next one.
  for (int r : {0, 1, 2}) {
    job.ranks[r].world_seq++;
    job.ranks[r].in_flight = true;
  }
  std::vector<std::string> last;
  for (int poll = 2; poll <= 5; ++poll) {
    for (auto& f : job.ranks) f.counter++, f.unix_ms = poll * 1000;
    last = kinds(observe(m, job, poll, poll * 1000));
  }
  EXPECT_EQ(last, std::vector<std::string>{"behind/3"});
  const Screen s = observe(m, job, 6, 6000);
  EXPECT_NE(s.alarms.at(0).message.find("ranks 0,1,2 at #32 (in flight); rank 3 at #31"), std::string::npos)
      << s.alarms.at(0).message;
}

TEST(JobMonitor, AStragglerIsTheRankWhoseComputeExceedsTheFactorTimesTheMedian) {
  JobMonitor m({});
  Job job(4);
  // Same wall step time everywhere (synchronous): rank 1 computes 200 ms, the others 100 ms
  // and wait 100 ms for it.
  std::vector<std::string> last;
  for (int poll = 1; poll <= 4; ++poll) {
    for (int r = 0; r < 4; ++r) job.advance(r, poll * 1000, r == 1 ? 0.2 : 0.1, r == 1 ? 0.0 : 0.1);
    last = kinds(observe(m, job, poll, poll * 1000));
  }
  EXPECT_EQ(last, std::vector<std::string>{"straggler/1"});
  // 1.3x is within the default factor 1.5.
  JobMonitor calm({});
  Job job2(4);
  for (int poll = 1; poll <= 4; ++poll) {
    for (int r = 0; r < 4; ++r) job2.advance(r, poll * 1000, r == 1 ? 0.13 : 0.1, r == 1 ? 0.0 : 0.03);
    last = kinds(observe(calm, job2, poll, poll * 1000));
  }
  EXPECT_TRUE(last.empty()) << last.front();
}

NodeView gpu_node(double power_w, int processes, int64_t used_mib) {
  NodeView n;
  n.host = "gpu001";
  n.source = "ssh";
  for (int i = 0; i < 2; ++i) {
    GpuStats g;
    g.index = i;
    g.power_w = power_w;
    g.power_limit_w = 700;
    g.memory_used_bytes = used_mib << 20;
    g.memory_total_bytes = int64_t{81559} << 20;
    n.gpus.push_back(g);
  }
  n.gpu_processes = processes;
  return n;
}

TEST(JobMonitor, NodeAlarmsComeFromTheNodesRecentPast) {
  JobMonitor m({});
  auto kinds_for = [&](NodeView n) {
    Screen s;
    s.nodes = {n};
    m.observe_nodes(s);
    return kinds(s);
  };
  EXPECT_TRUE(kinds_for(gpu_node(690, 2, 70000)).empty());
  EXPECT_EQ(kinds_for(gpu_node(70, 2, 70000)), std::vector<std::string>{"power_drop/-1"});
  EXPECT_EQ(kinds_for(gpu_node(690, 1, 70000)), std::vector<std::string>{"processes_drop/-1"});
  EXPECT_EQ(kinds_for(gpu_node(690, 2, 79000)),
            (std::vector<std::string>{"memory_near_limit/-1", "memory_near_limit/-1"}));
}

TEST(EventLog, OneLineWhenRaisedAndOneWhenCleared) {
  const std::string path = ::testing::TempDir() + "/events.jsonl";
  std::remove(path.c_str());
  {
    EventLog log(path);
    Screen s;
    s.unix_ms = 1;
    s.alarms = {{"stalled", 2, "node1", "rank 2 stalled"}};
    log.update(s);
    s.unix_ms = 2;
    log.update(s);  // still raised: nothing new
    s.unix_ms = 3;
    s.alarms.clear();
    log.update(s);
  }
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["event"], "raised");
  EXPECT_EQ(lines[0]["rank"], 2);
  EXPECT_EQ(lines[0]["unix_ms"], 1);
  EXPECT_EQ(lines[1]["event"], "cleared");
  EXPECT_EQ(lines[1]["unix_ms"], 3);
  EXPECT_THROW(EventLog("/no/such/folder/events.jsonl"), UsageError);
}

TEST(Render, SparklineScalesToTheGivenMaximum) {
  EXPECT_EQ(sparkline({0, 50, 100}, 100, 10), "▁▄█");
  EXPECT_EQ(sparkline({1, 2, 3, 4}, 4, 2), "▆█");
}

// srun -m cyclic deals ranks round-robin over the nodes: the rank table still shows each
// host's ranks together, in the NODE table's order, sorted by the chosen key inside a host.
TEST(Render, RanksAreGroupedByHostInTheNodeTablesOrder) {
  Screen screen;
  screen.nodes.resize(2);
  screen.nodes[0].host = "node7";
  screen.nodes[1].host = "node6";
  for (int rank = 0; rank < 4; ++rank) {
    RankRow row;
    row.rank = rank;
    row.host = rank % 2 ? "node6" : "node7";
    screen.ranks.push_back(row);
  }
  std::vector<std::string> order;
  for (const Line& line : render_screen(screen, SortKey::Rank, /*descending=*/true)) {
    if (line.text.find(" node") != std::string::npos && line.text.rfind("node", 0) != 0) order.push_back(line.text.substr(0, 1));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"2", "0", "3", "1"}));
}

TEST(Nvml, LoadsOrSaysNoNvml) {
  // CI machines have no GPU: the loader must say so in one line, and the node still shows CPU
  // numbers. On a GPU machine it must find at least one GPU with sane numbers.
  Nvml nvml;
  const NodeView n = local_node(nvml, {});
  EXPECT_GT(n.cpus, 0);
  EXPECT_GE(n.load1, 0);
  EXPECT_GT(n.memory_total_bytes, 0);
  if (!nvml.available()) {
    EXPECT_EQ(nvml.error().rfind("no NVML: ", 0), 0u) << nvml.error();
    EXPECT_EQ(n.gpu_note, nvml.error());
    EXPECT_TRUE(n.gpus.empty());
    EXPECT_EQ(n.source, "proc");
  } else {
    ASSERT_FALSE(n.gpus.empty()) << n.gpu_note;
    for (const GpuStats& g : n.gpus) {
      std::printf("GPU %d %s: util %.0f%% power %.1f/%.1f W memory %lld/%lld MiB, %d processes\n", g.index,
                  g.name.c_str(), g.util_pct, g.power_w, g.power_limit_w,
                  static_cast<long long>(g.memory_used_bytes >> 20), static_cast<long long>(g.memory_total_bytes >> 20),
                  g.processes);
      EXPECT_GE(g.util_pct, 0);
      EXPECT_LE(g.util_pct, 100);
      EXPECT_GT(g.power_limit_w, 0);
      EXPECT_GT(g.memory_total_bytes, 0);
      EXPECT_GE(g.processes, 0);
    }
  }
}

}  // namespace
}  // namespace ddx::top
