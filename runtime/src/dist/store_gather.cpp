#include "ddx/store_gather.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddx/process_group.h"

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

}  // namespace ddx
