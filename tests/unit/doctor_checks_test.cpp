// `ddx doctor`'s checks judged on injected facts: each check turns FAIL or WARN with the right
// fix for a failing input (a small /dev/shm, a skewed clock, another version, a missing
// interface, ...) and PASS/SKIP on a healthy one. Also collect_facts on this machine and on a
// fake sysfs tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "doctor/doctor_checks.h"
#include "ddx/rendezvous/net_interface.h"
#include "doctor/doctor_facts.h"

namespace ddx::doctor {
namespace {

using nlohmann::json;

// A healthy rank as collect_facts would describe it.
json healthy(int rank, const std::string& host = "a", int local_world = 2) {
  return {{"host", host}, {"rank", rank}, {"local_rank", rank % local_world}, {"local_world_size", local_world},
          {"num_nodes", 1}, {"versions", {{"ddx", "0.1.0"}, {"libtorch", "2.11.0"}}},
          {"shm", {{"path", "/dev/shm"}, {"size", 8ULL << 30}, {"free", 8ULL << 30}, {"tmpfs", true}}},
          {"ulimits", {{"nofile", 1048576}, {"memlock", -1}, {"core", -1}}}, {"cores", 16},
          {"omp_num_threads", "4"}, {"env", json::object()}, {"interfaces", {"eth0", "lo"}},
          {"infiniband", json::array()}, {"master_addr", "10.0.0.1"}, {"master_resolved", {"10.0.0.1"}},
          {"route_interface", "eth0"}, {"hostname_resolved", {"10.0.0.2"}},
          {"gloo_interface", {{"interface", "eth0"}, {"address", "10.0.0.2"}, {"error", ""},
                              {"reason", "interface eth0 (10.0.0.2), the address hostname resolves to"}}},
          {"disk", {{"path", "/ckpt"}, {"free", 100ULL << 30}}}, {"numa_nodes", 1}, {"governor", "performance"},
          {"gpus", 0}, {"clock_offset_ms", 0.0},
          {"cpu_kernels", {{"aten", "AVX512"}, {"aten_env", nullptr}, {"mkl", "auto on avx512_amx"}}}};
}

const CheckRow& row(const std::vector<CheckRow>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.name == name) return r;
  }
  throw std::runtime_error("no row " + name);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DoctorChecks, HealthyRanksPassAndMissingHardwareSaysSkip) {
  const auto rows = evaluate({healthy(0), healthy(1)});
  EXPECT_EQ(exit_code(rows), 0) << format_table(rows);
  for (const auto& r : rows) EXPECT_NE(r.status, Status::Fail) << r.name << ": " << r.value;
  EXPECT_EQ(row(rows, "GPUs vs local ranks").status, Status::Skip);
  EXPECT_EQ(row(rows, "GPUs vs local ranks").value, "skipped: no GPU");
  EXPECT_EQ(row(rows, "clock skew between hosts").value, "skipped: one host");
}

TEST(DoctorChecks, SmallDevShmFailsWithGpusAndWarnsWithout) {
  std::vector<json> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(healthy(r, "a", 4));
    ranks.back()["shm"]["free"] = 64ULL << 20;
    ranks.back()["gpus"] = 4;
  }
  auto shm = row(evaluate(ranks), "/dev/shm vs local ranks");
  EXPECT_EQ(shm.status, Status::Fail);
  EXPECT_EQ(shm.value, "a: 64.0 MiB free, 4 local ranks need 220.6 MiB");
  EXPECT_TRUE(has(shm.fix, "docker run --shm-size=2g")) << shm.fix;
  for (auto& r : ranks) r["gpus"] = 0;
  EXPECT_EQ(row(evaluate(ranks), "/dev/shm vs local ranks").status, Status::Warn);
  for (auto& r : ranks) r["env"]["NCCL_SHM_DISABLE"] = "1";
  EXPECT_EQ(row(evaluate(ranks), "/dev/shm vs local ranks").status, Status::Pass);
}

TEST(DoctorChecks, ClockSkewBetweenHostsWarnsThenFails) {
  json a = healthy(0, "a", 1), b = healthy(1, "b", 1);
  b["clock_offset_ms"] = 250.0;
  auto clock = row(evaluate({a, b}), "clock skew between hosts");
  EXPECT_EQ(clock.status, Status::Warn);
  EXPECT_EQ(clock.value, "250.0 ms between b and a");
  b["clock_offset_ms"] = -1500.0;
  clock = row(evaluate({a, b}), "clock skew between hosts");
  EXPECT_EQ(clock.status, Status::Fail);
  EXPECT_TRUE(has(clock.fix, "chrony")) << clock.fix;
}

TEST(DoctorChecks, AnotherVersionOnOneRankFailsAndNamesIt) {
  json odd = healthy(2, "b");
  odd["versions"]["libtorch"] = "2.10.0";
  auto v = row(evaluate({healthy(0), healthy(1), odd}), "same versions on every rank");
  EXPECT_EQ(v.status, Status::Fail);
  EXPECT_EQ(v.value, "libtorch 2.10.0 on rank 2 (b) (others 2.11.0)");
  EXPECT_TRUE(has(v.fix, "same")) << v.fix;
}

TEST(DoctorChecks, ARankOnOtherCpuKernelsWarnsNamingItAndTheVariables) {
  std::vector<json> ranks{healthy(0), healthy(1), healthy(2, "b"), healthy(3, "b")};
  auto kernels = row(evaluate(ranks), "same CPU kernels on every rank");
  EXPECT_EQ(kernels.status, Status::Pass);
  EXPECT_EQ(kernels.value, "ATen AVX512, MKL auto on avx512_amx on 4 ranks");
  // Host b without AVX-512: MKL takes its AVX2 branch there, and ATen its AVX2 kernels.
  for (int r : {2, 3}) ranks[r]["cpu_kernels"] = {{"aten", "AVX2"}, {"aten_env", nullptr}, {"mkl", "auto on avx2"}};
  ranks.push_back(healthy(4, "a"));
  kernels = row(evaluate(ranks), "same CPU kernels on every rank");
  EXPECT_EQ(kernels.status, Status::Warn);
  EXPECT_EQ(kernels.value, "ATen AVX2, MKL auto on avx2 on rank 2 (b), rank 3 (b) (others ATen AVX512, MKL auto on avx512_amx)");
  EXPECT_TRUE(has(kernels.fix, "ATEN_CPU_CAPABILITY")) << kernels.fix;
  EXPECT_TRUE(has(kernels.fix, "MKL_CBWR")) << kernels.fix;
  EXPECT_EQ(exit_code(evaluate(ranks)), 0);  // a warning: training itself is fine
  // Pinned on every host: the same branch whatever the CPU.
  for (auto& r : ranks) r["cpu_kernels"] = {{"aten", "AVX2"}, {"aten_env", "avx2"}, {"mkl", "MKL_CBWR=AVX2"}};
  EXPECT_EQ(row(evaluate(ranks), "same CPU kernels on every rank").status, Status::Pass);
  // A rank that did not report (an older ddx) is a SKIP, never a false PASS.
  ranks[1].erase("cpu_kernels");
  EXPECT_EQ(row(evaluate(ranks), "same CPU kernels on every rank").status, Status::Skip);
}

TEST(DoctorFacts, MklBranchFollowsTheCpuAndItsVariables) {
  EXPECT_EQ(cpu_isa("fpu sse4_2 avx avx2 avx512f avx512_vnni amx_tile amx_bf16"), "avx512_amx");
  EXPECT_EQ(cpu_isa("fpu sse4_2 avx avx2 avx512f avx512_vnni"), "avx512_vnni");
  EXPECT_EQ(cpu_isa("fpu sse4_2 avx avx2 fma"), "avx2");
  EXPECT_EQ(cpu_isa("fpu sse4_2"), "sse4_2");
  EXPECT_EQ(cpu_isa(""), "older");
  EXPECT_EQ(mkl_branch({}, "avx2"), "auto on avx2");
  EXPECT_EQ(mkl_branch({{"MKL_ENABLE_INSTRUCTIONS", "AVX2"}}, "avx512"), "MKL_ENABLE_INSTRUCTIONS=AVX2 on avx512");
  EXPECT_EQ(mkl_branch({{"MKL_ENABLE_INSTRUCTIONS", "AVX2"}, {"MKL_CBWR", "AVX2"}}, "avx512"), "MKL_CBWR=AVX2");
}

TEST(DoctorChecks, InterfacesNamedInEnvMustExist) {
  auto with = [](const std::string& key, const std::string& value) {
    json r = healthy(0);
    r["env"][key] = value;
    return row(evaluate({r}), "interfaces named in env");
  };
  auto missing = with("NCCL_SOCKET_IFNAME", "ib0");
  EXPECT_EQ(missing.status, Status::Fail);
  EXPECT_TRUE(has(missing.value, "NCCL_SOCKET_IFNAME=ib0 on rank 0 (a): no interface 'ib0'")) << missing.value;
  EXPECT_TRUE(has(missing.fix, "a has eth0,lo")) << missing.fix;
  EXPECT_TRUE(has(missing.fix, "the route to MASTER_ADDR uses eth0")) << missing.fix;
  EXPECT_EQ(with("NCCL_SOCKET_IFNAME", "eth").status, Status::Pass);  // NCCL: a prefix
  EXPECT_EQ(with("NCCL_SOCKET_IFNAME", "=eth").status, Status::Fail);  // '=': exact
  EXPECT_EQ(with("NCCL_SOCKET_IFNAME", "^docker").status, Status::Pass);
  EXPECT_EQ(with("GLOO_SOCKET_IFNAME", "eth").status, Status::Fail);  // Gloo: exact names
  EXPECT_EQ(with("GLOO_SOCKET_IFNAME", "eth0").status, Status::Pass);
  auto hca = with("NCCL_IB_HCA", "mlx5_0:1");
  EXPECT_EQ(hca.status, Status::Fail);
  EXPECT_TRUE(has(hca.value, "no RDMA device 'mlx5_0'")) << hca.value;
}

TEST(DoctorChecks, UnresolvableMasterFails) {
  json r = healthy(1);
  r.erase("master_resolved");
  r["master_addr"] = "nosuchhost";
  r["master_error"] = "Name or service not known";
  auto m = row(evaluate({healthy(0), r}), "MASTER_ADDR from every rank");
  EXPECT_EQ(m.status, Status::Fail);
  EXPECT_EQ(m.value, "rank 1 (a): 'nosuchhost' Name or service not known");
}

// The Gloo row reports World::init's own choice (net_interface.h), judged on injected hosts.
json gloo_choice(const InterfaceFacts& f) {
  const InterfaceChoice c = choose_interface(f);
  return {{"interface", c.interface}, {"address", c.address}, {"reason", c.reason}, {"error", c.error}};
}

TEST(DoctorChecks, GlooInterfaceRowShowsTheRouteChosenOrTheErrorWithItsFix) {
  InterfaceFacts b_net;
  b_net.master_addr = "10.0.0.1";
  b_net.hostname = "b";
  b_net.hostname_addresses = {"127.0.1.1"};
  b_net.interfaces = {{"lo", "127.0.0.1"}, {"veth1", "10.0.0.2"}};
  b_net.route_interface = "veth1";
  json a = healthy(0, "a", 1), b = healthy(1, "b", 1);
  b["gloo_interface"] = gloo_choice(b_net);
  auto g = row(evaluate({a, b}), "interface Gloo will use");
  EXPECT_EQ(g.status, Status::Pass);
  EXPECT_TRUE(has(g.value, "b: interface veth1 (10.0.0.2), the route to MASTER_ADDR 10.0.0.1")) << g.value;
  b_net.gloo_socket_ifname = "eth9";
  b["gloo_interface"] = gloo_choice(b_net);
  g = row(evaluate({a, b}), "interface Gloo will use");
  EXPECT_EQ(g.status, Status::Fail);
  EXPECT_TRUE(has(g.value, "b: GLOO_SOCKET_IFNAME=eth9 names no interface with an address on b")) << g.value;
  EXPECT_EQ(g.fix, "export GLOO_SOCKET_IFNAME=veth1 (the interface that routes to MASTER_ADDR 10.0.0.1) on b");
}

TEST(DoctorChecks, HostsThatCannotReachEachOtherFail) {
  json a = healthy(0, "a", 1), b = healthy(1, "b", 1);
  EXPECT_EQ(row(evaluate({a, b}), "hosts reach each other").status, Status::Pass);
  a["reach"] = {{{"host", "b"}, {"address", "10.0.0.2:4000"}, {"ok", true}, {"error", ""}}};
  b["reach"] = {{{"host", "a"}, {"address", "10.9.0.1:4001"}, {"ok", false}, {"error", "Network is unreachable"}}};
  auto r = row(evaluate({a, b}), "hosts reach each other");
  EXPECT_EQ(r.status, Status::Fail);
  EXPECT_EQ(r.value, "b -> a at 10.9.0.1:4001: Network is unreachable");
  EXPECT_TRUE(has(r.fix, "GLOO_SOCKET_IFNAME")) << r.fix;
  EXPECT_EQ(row(evaluate({healthy(0), healthy(1)}), "hosts reach each other").status, Status::Skip);
}

TEST(DoctorChecks, LimitsDiskThreadsAndGovernor) {
  json r = healthy(0);
  r["ulimits"] = {{"nofile", 1024}, {"memlock", 65536}, {"core", 0}};
  r["gpus"] = 2;
  r["disk"]["free"] = 500ULL << 20;
  r["omp_num_threads"] = "16";
  r["governor"] = "powersave";
  const auto rows = evaluate({r});
  EXPECT_EQ(row(rows, "ulimit -n (open files)").status, Status::Warn);
  EXPECT_TRUE(has(row(rows, "ulimit -n (open files)").fix, "ulimit -n 1048576"));
  EXPECT_EQ(row(rows, "ulimit -l (locked memory)").status, Status::Warn);
  EXPECT_TRUE(has(row(rows, "ulimit -l (locked memory)").fix, "memlock=-1"));
  EXPECT_EQ(row(rows, "ulimit -c (core dumps)").status, Status::Warn);
  EXPECT_EQ(row(rows, "free disk at the save folder").status, Status::Fail);
  EXPECT_EQ(row(rows, "OMP_NUM_THREADS vs cores").status, Status::Warn);
  EXPECT_TRUE(has(row(rows, "OMP_NUM_THREADS vs cores").fix, "OMP_NUM_THREADS=8"));
  EXPECT_EQ(row(rows, "CPU governor and NUMA").status, Status::Warn);
  EXPECT_EQ(exit_code(rows), 1);
  r["disk"]["free"] = 5ULL << 30;
  r.erase("omp_num_threads");
  r["omp_num_threads"] = nullptr;
  const auto later = evaluate({r});
  EXPECT_EQ(row(later, "free disk at the save folder").status, Status::Warn);
  EXPECT_EQ(row(later, "OMP_NUM_THREADS vs cores").status, Status::Warn);
  json few = healthy(0, "a", 4);
  few["gpus"] = 2;
  EXPECT_EQ(row(evaluate({few}), "GPUs vs local ranks").status, Status::Fail);
}

TEST(DoctorFacts, ThisMachineAndAFakeSysfs) {
  const std::string sys = std::string(DDX_BINARY_DIR) + "/test-scratch/doctor-sysfs";
  std::filesystem::remove_all(sys);
  std::filesystem::create_directories(sys + "/devices/system/node/node0");
  std::filesystem::create_directories(sys + "/devices/system/node/node1");
  std::filesystem::create_directories(sys + "/devices/system/cpu/cpu0/cpufreq");
  std::filesystem::create_directories(sys + "/class/infiniband/mlx5_0");
  std::ofstream(sys + "/devices/system/cpu/cpu0/cpufreq/scaling_governor") << "powersave\n";
  std::ofstream(sys + "/cpuinfo") << "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2\n";
  FactsInput in;
  in.info.hostname = "localhost";
  in.info.master_addr = "127.0.0.1";
  in.versions = {{"ddx", "0.1.0"}};
  in.sysfs_root = sys;
  in.cpuinfo_path = sys + "/cpuinfo";
  in.aten_capability = "AVX2";
  const json f = collect_facts({{"NCCL_SOCKET_IFNAME", "lo"}, {"HOME", "/root"}}, in);
  EXPECT_EQ(f["cpu_kernels"], json({{"aten", "AVX2"}, {"aten_env", nullptr}, {"mkl", "auto on avx2"}}));
  EXPECT_TRUE(f["shm"]["tmpfs"].get<bool>());
  EXPECT_GT(f["cores"].get<int>(), 0);
  EXPECT_NE(std::find(f["interfaces"].begin(), f["interfaces"].end(), "lo"), f["interfaces"].end());
  EXPECT_EQ(f["route_interface"], "lo");
  EXPECT_EQ(f["env"], json({{"NCCL_SOCKET_IFNAME", "lo"}}));
  EXPECT_EQ(f["numa_nodes"], 2);
  EXPECT_EQ(f["governor"], "powersave");
  EXPECT_EQ(f["infiniband"], json({"mlx5_0"}));
  EXPECT_GT(f["disk"]["free"].get<uint64_t>(), 0u);
  EXPECT_TRUE(f["master_resolved"].is_array());
  // And these facts judged alone: healthy enough to have no FAIL on the interface check.
  EXPECT_EQ(row(evaluate({f}), "interfaces named in env").status, Status::Pass);
}

}  // namespace
}  // namespace ddx::doctor
