#pragma once
// The fake scontrol (tests/fake_scontrol/scontrol) set up for one test: a folder with what it
// answers, put first on this process's PATH (children inherit it). Restores PATH when destroyed.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ddx::testing {

// The line SLURM 22.05 prints for `scontrol show node NAME -o`, with the state and reason given.
inline std::string scontrol_node_line(const std::string& node, const std::string& state, const std::string& reason) {
  std::string line = "NodeName=" + node +
                     " Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.12 "
                     "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=10.0.0.2 NodeHostName=" + node +
                     " Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP Debian 6.1.76-1 (2024-02-01) RealMemory=1 AllocMem=0 "
                     "FreeMem=1024 Sockets=2 Boards=1 State=" + state +
                     " ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=debug "
                     "BootTime=2025-01-01T00:00:00 SlurmdStartTime=2025-01-01T00:00:01 LastBusyTime=2025-01-01T00:00:02 "
                     "CfgTRES=cpu=2,mem=1M,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 "
                     "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s";
  if (!reason.empty()) line += " Reason=" + reason + " [root@2025-01-01T00:00:03]";
  return line + "\n";
}

class FakeScontrolOnPath {
 public:
  // `dir`: an empty scratch folder of the test's.
  explicit FakeScontrolOnPath(std::string dir) : dir_(std::move(dir)) {
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (std::string(FAKE_SCONTROL_DIR) + ":" + old_path_).c_str(), 1);
    ::setenv("FAKE_SCONTROL_DIR", dir_.c_str(), 1);
    plant("node-b", "IDLE", "");
  }
  ~FakeScontrolOnPath() {
    ::setenv("PATH", old_path_.c_str(), 1);
    ::unsetenv("FAKE_SCONTROL_DIR");
  }
  FakeScontrolOnPath(const FakeScontrolOnPath&) = delete;
  FakeScontrolOnPath& operator=(const FakeScontrolOnPath&) = delete;

  void write(const std::string& name, const std::string& text) const { std::ofstream(dir_ + "/" + name) << text; }
  void plant(const std::string& node, const std::string& state, const std::string& reason) const {
    write("node", scontrol_node_line(node, state, reason));
  }
  std::vector<std::string> calls() const {
    std::ifstream in(dir_ + "/calls");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, old_path_;
};

}  // namespace ddx::testing
