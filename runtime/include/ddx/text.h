#pragma once
// Small formatting helpers shared by reports and error messages.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx {

// "[4, 1024]"
std::string shape_text(const std::vector<int64_t>& shape);
// "rank 3" or "ranks 0,2,5"
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace ddx
