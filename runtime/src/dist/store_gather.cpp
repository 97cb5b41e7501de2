#include "ddx/store_gather.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddx/process_group.h"
#include "ddx/errors/verdict.h"

namespace ddx {

std::vector<std::string> gather_on_rank0(World& world, const std::string& topic, const std::string& mine) {
  c10d::Store& store = world.store();
  const std::string prefix = "ddx/" + topic + "/";
  store.set(prefix + "rank" + std::to_string(world.rank()), std::vector<uint8_t>(mine.begin(), mine.end()));
  if (world.rank() != 0) {
    store.wait({prefix + "done"});
    return {};
  }
  std::vector<std::string> all;
  for (int r = 0; r < world.size(); ++r) {
    const std::vector<uint8_t> bytes = store.get(prefix + "rank" + std::to_string(r));
    all.emplace_back(bytes.begin(), bytes.end());
  }
  store.set(prefix + "done", std::vector<uint8_t>{1});
  return all;
}

std::vector<std::string> gather_on_all_ranks(World& world, const std::string& topic, const std::string& mine) {
  c10d::Store& store = world.store();
  const std::string prefix = "ddx/" + topic + "/";
  store.set(prefix + "rank" + std::to_string(world.rank()), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> all;
  for (int r = 0; r < world.size(); ++r) {
    const std::vector<uint8_t> bytes = store.get(prefix + "rank" + std::to_string(r));
    all.emplace_back(bytes.begin(), bytes.end());
  }
  // Rank 0 hosts the store: it stays until every rank has read.
  store.set(prefix + "read" + std::to_string(world.rank()), std::vector<uint8_t>{1});
  if (world.rank() == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < world.size(); ++r) keys.push_back(prefix + "read" + std::to_string(r));
    store.wait(keys);
  }
  return all;
}

int agree_on_verdict(World& world, const std::string& topic, int exit_code, const std::string& verdict) {
  c10d::Store& store = world.store();
  const std::string key = "ddx/" + topic + "/verdict";
  std::string rank0;
  if (world.rank() == 0) {
    rank0 = std::to_string(exit_code) + " " + verdict;
    store.set(key, std::vector<uint8_t>(rank0.begin(), rank0.end()));
  } else {
    // Waits for rank 0's; rank 0 keeps the store up until every rank has checked out (World::shutdown).
    const std::vector<uint8_t> bytes = store.get(key);
    rank0.assign(bytes.begin(), bytes.end());
  }
  const size_t space = rank0.find(' ');
  const int code = std::stoi(rank0.substr(0, space));
  if (code != 0) write_verdict_report(rank0.substr(space + 1), code);
  return code;
}

}  // namespace ddx
