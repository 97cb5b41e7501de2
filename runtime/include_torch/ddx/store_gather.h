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

// Rank 0's verdict on every rank, for a command whose rank 0 alone judged what was gathered
// (doctor, selfcheck, gpu-health): rank 0 passes its exit code and one-line verdict, the others
// anything. Every rank returns rank 0's code and, when it is not 0, has written the verdict into
// its error file (ddx/errors/verdict.h), so the whole job ends with one code and a launcher reports a
// verdict, not a crash of whichever rank exited first.
int agree_on_verdict(World& world, const std::string& topic, int exit_code, const std::string& verdict);

}  // namespace ddx
