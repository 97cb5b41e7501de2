// Named mesh dimensions over the world's ranks (row-major: the last dimension varies fastest,
// so with {dp, tp} the tp groups are runs of consecutive ranks).
#include <sstream>

#include "ddx/errors/errors.h"
#include "ddx/process_group.h"

namespace ddx {

DeviceMesh::DeviceMesh(World& world, std::vector<std::pair<std::string, int>> dims)
    : dims_(std::move(dims)) {
  long long product = 1;
  std::ostringstream id;
  for (const auto& [name, size] : dims_) {
    if (size < 1) throw UsageError("mesh dimension " + name + " has size " + std::to_string(size));
    product *= size;
    id << (id.tellp() > 0 ? "x" : "") << name << size;
  }
  if (product != world.size()) {
    throw UsageError("mesh " + id.str() + " needs " + std::to_string(product) +
                     " ranks but the world has " + std::to_string(world.size()));
  }
  const int n = static_cast<int>(dims_.size());
  std::vector<int> stride(n, 1);
  for (int k = n - 2; k >= 0; --k) stride[k] = stride[k + 1] * dims_[k + 1].second;
  coords_.resize(n);
  for (int k = 0; k < n; ++k) coords_[k] = (world.rank() / stride[k]) % dims_[k].second;

  // Every rank walks every slice of every dimension in the same order; World::new_group only
  // builds the groups this rank is in.
  for (int k = 0; k < n; ++k) {
    const int slices = world.size() / dims_[k].second;
    for (int s = 0; s < slices; ++s) {
      // Slice s enumerates the other dimensions' coordinates in row-major order.
      int base = 0, rest = s;
      for (int j = n - 1; j >= 0; --j) {
        if (j == k) continue;
        base += (rest % dims_[j].second) * stride[j];
        rest /= dims_[j].second;
      }
      std::vector<int> ranks;
      for (int c = 0; c < dims_[k].second; ++c) ranks.push_back(base + c * stride[k]);
      Group* g = world.new_group(id.str() + "." + dims_[k].first + "." + std::to_string(s), ranks);
      if (g) groups_[dims_[k].first] = g;
    }
  }
}

int DeviceMesh::dim_index(const std::string& dim) const {
  for (size_t k = 0; k < dims_.size(); ++k) {
    if (dims_[k].first == dim) return static_cast<int>(k);
  }
  throw std::invalid_argument("mesh has no dimension " + dim);
}

Group& DeviceMesh::group(const std::string& dim) { return *groups_.at(dims_[dim_index(dim)].first); }
int DeviceMesh::coordinate(const std::string& dim) const { return coords_[dim_index(dim)]; }
int DeviceMesh::size(const std::string& dim) const { return dims_[dim_index(dim)].second; }

std::string DeviceMesh::describe() const {
  std::ostringstream out;
  for (size_t k = 0; k < dims_.size(); ++k) {
    out << (k ? " x " : "") << dims_[k].first << "=" << dims_[k].second;
  }
  out << "; this rank:";
  for (size_t k = 0; k < dims_.size(); ++k) out << " " << dims_[k].first << " " << coords_[k];
  return out.str();
}

}  // namespace ddx
