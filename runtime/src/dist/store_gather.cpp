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

}  // namespace ddx
