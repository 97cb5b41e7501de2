#pragma once
// PyTorch's flight recorder writes its dumps as pickles (torch::jit::pickle of a dict of lists,
// strings and numbers). Decoded with LibTorch's own unpickler and read through DumpValue, so the
// rest of the analyzer stays LibTorch-free: this file's .cpp is its only LibTorch translation unit.
#include <functional>
#include <string>

#include "analyzer/dump_value.h"

namespace ddx::analyze {

// True when `bytes` starts like a pickle (the PROTO opcode 0x80 and a protocol number 2..5).
bool looks_like_pickle(const std::string& bytes);

// Unpickles `bytes` and calls read(root) with a view of the value, valid during the call only:
// the decoded value is freed when read returns, so each dump's IValues live no longer than it
// takes to read them. Dicts read as dicts (non-string keys as text), lists and tuples as lists,
// None as null; anything else (a tensor, an object) as Kind::Other. Throws std::runtime_error
// with the unpickler's reason, in one line, for a truncated or damaged pickle; what read throws
// passes through unchanged.
void read_pickle(const std::string& bytes, const std::function<void(const DumpValue& root)>& read);

}  // namespace ddx::analyze
