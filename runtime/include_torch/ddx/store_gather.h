#pragma once
// Gathering one text per rank on rank 0 through the rendezvous store: how the preflight-style
// commands (doctor, selfcheck, the per-rank probes) collect their results, since the store
// works even where a collective would not. Rank 0 hosts the store, so the other ranks wait
// until it has read everything before they may exit.
#include <string>
#include <vector>

namespace ddx {

class World;

// Every rank's `mine`, in rank order, on rank 0; an empty list on the others (returned once
// rank 0 has read them). `topic` keeps gathers of different commands apart ("doctor/facts").
std::vector<std::string> gather_on_rank0(World& world, const std::string& topic, const std::string& mine);

// Every rank's `mine`, in rank order, on every rank (so that every rank can reach the same
// decision from the same data without another message). Returns once every rank has read them.
std::vector<std::string> gather_on_all_ranks(World& world, const std::string& topic, const std::string& mine);

}  // namespace ddx
