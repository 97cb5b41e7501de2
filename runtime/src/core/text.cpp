#include "ddx/text.h"

#include <sstream>

namespace ddx {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? "," : "") << ranks[i];
  return out.str();
}

}  // namespace ddx
