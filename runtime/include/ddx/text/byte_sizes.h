#pragma once
// Byte counts as people type them on command lines ("64K", "8M", "1G"; binary suffixes, as
// nccl-tests reads -b/-e and docker reads --shm-size), and back for headers and messages.
// Shared by the bandwidth probe's sweep, ddx launch --shm-size, the buserror probe and
// ddx validate.
#include <cstddef>
#include <string>

namespace ddx {

// "8", "128K", "32M", "8G", "1T" -> bytes. Throws UsageError naming `flag` when malformed or
// too large.
size_t parse_bytes(const std::string& flag, const std::string& text);

// 33554432 -> "32M" when exact, otherwise the plain number.
std::string format_bytes(size_t bytes);

}  // namespace ddx
