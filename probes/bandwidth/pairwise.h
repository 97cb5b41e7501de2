#pragma once
// Pairwise mode: every pair of ranks exchanges data while the other pairs of the same round
// do too, so n-1 rounds (n for odd n) of disjoint pairs cover every link without two pairs
// sharing a rank. A bad NIC, cable or GPU shows up as a row of slow links (a slow rank) or a
// single slow link, named by host and local rank.
#include <vector>

#include "bandwidth/results.h"

namespace ddx::bw {

// The rounds of the circle method: round r pairs ranks so that each pair appears exactly once
// over all rounds. Each round lists (a, b) with a < b; with odd n one rank sits out per round.
std::vector<std::vector<std::pair<int, int>>> pair_rounds(int nranks);

// This rank's partner in `round`, or -1 when it sits out.
int partner_in_round(const std::vector<std::pair<int, int>>& round, int rank);

// Fills the matrix, the median link, and the slow links and ranks of `report.pairs`. A rank is
// slow when the median of its links is below `fraction` x the median of that figure over the
// other ranks and below their spread (ddx/outliers.h), or below `min_gbs` when > 0; the median link is then taken over links between ranks that
// are not slow, and a link is slow below `fraction` x that median (or below `min_gbs`).
void analyze_pairs(PairReport& report, double fraction, double min_gbs);

}  // namespace ddx::bw
