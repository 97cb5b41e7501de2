#include "bandwidth/test_perturbation.h"

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "bandwidth/verifiable.h"
#include "ddx/env.h"
#include "ddx/errors.h"

namespace ddx::bw {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool matches(const std::string& op, Collective c, bool send_side) {
  return op == "*" || op == record_name(c, send_side);
}

}  // namespace

const char* record_name(Collective c, bool send_side) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllToAll: return "all_to_all";
    case Collective::SendRecv: return send_side ? "send" : "recv";
  }
  return "?";
}

TestPerturbation TestPerturbation::from_env(int rank) {
  const char* spec = std::getenv("DDX_TEST_PERTURB");
  return parse(spec ? spec : "", rank);
}

TestPerturbation TestPerturbation::parse(const std::string& spec, int rank) {
  TestPerturbation t;
  for (const std::string& item : split(spec, ';')) {
    auto parts = split(item, ':');
    const bool ok = (parts.size() == 3 && parts[0] == "corrupt") || (parts.size() == 4 && parts[0] == "delay");
    if (!ok) {
      throw UsageError("DDX_TEST_PERTURB item '" + item + "' is not corrupt:<op>:<rank> or delay:<op>:<rank>:<ms>");
    }
    const int target = static_cast<int>(parse_int("DDX_TEST_PERTURB rank", parts[2], 0, 1 << 20));
    Item it;
    it.corrupt = parts[0] == "corrupt";
    it.op = parts[1];
    if (!it.corrupt) it.delay_ms = static_cast<int>(parse_int("DDX_TEST_PERTURB delay", parts[3], 0, 3600000));
    if (target == rank) t.items_.push_back(it);
  }
  return t;
}

void TestPerturbation::before_launch(Collective c) const {
  for (const auto& it : items_) {
    if (!it.corrupt && matches(it.op, c, true)) std::this_thread::sleep_for(std::chrono::milliseconds(it.delay_ms));
  }
}

bool TestPerturbation::corrupts(Collective c) const {
  for (const auto& it : items_) {
    if (it.corrupt && matches(it.op, c, false)) return true;
  }
  return false;
}

void TestPerturbation::after_complete(Collective c, DataType t, void* output, size_t count) const {
  if (count == 0) return;
  for (const auto& it : items_) {
    if (it.corrupt && matches(it.op, c, false)) store_element(t, output, 0, load_element(t, output, 0) + 1);
  }
}

}  // namespace ddx::bw
