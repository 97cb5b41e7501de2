#pragma once
// JSON values as a Python pickle (protocol 2): what PyTorch's flight recorder writes, so that
// tools that pickle.load those dumps (torchfrtrace) read ddx's too. Internal to ddx_core.
#include <nlohmann/json.hpp>

#include <string>

namespace ddx {

// Objects become dicts (keys in the object's order), arrays lists, integers ints, reals
// floats, booleans bools and null None. The result loads with Python's pickle.load and with
// LibTorch's torch::jit::unpickle.
std::string to_pickle(const nlohmann::ordered_json& value);

}  // namespace ddx
