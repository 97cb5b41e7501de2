#pragma once
// PyTorch's flight recorder writes its dumps as pickles (torch::jit::pickle of a dict of lists,
// strings and numbers). Decoded with LibTorch's own unpickler into JSON, so the rest of the
// analyzer reads both of PyTorch's dump formats (pickle, JSON) one way and stays LibTorch-free:
// this file's .cpp is the analyzer's only LibTorch translation unit.
#include <nlohmann/json.hpp>

#include <string>

namespace ddx::analyze {

// True when `bytes` starts like a pickle (the PROTO opcode 0x80 and a protocol number 2..5).
bool looks_like_pickle(const std::string& bytes);

// The pickled value as JSON: dicts become objects (non-string keys written as text), lists and
// tuples arrays, None null. Throws std::runtime_error with the unpickler's reason, in one line,
// for a truncated or damaged pickle, or one holding objects that are not plain data.
nlohmann::json pickle_to_json(const std::string& bytes);

}  // namespace ddx::analyze
