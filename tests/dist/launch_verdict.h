#pragma once
// What `ddx launch` must print when its job ran to a verdict (ddx/errors/verdict.h: a probe naming a slow
// rank, a doctor FAIL, a missed --min-busbw): the verdict, every rank ending with its code, and no
// failure table blaming whichever rank exited first. Shared by the launcher's and the probes' tests.
#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace ddx::testing {

// `output`: the launcher's console. Every rank 0..ranks-1 (on a node started at `first_rank`:
// first_rank.. first_rank+ranks-1) has a row "exit <code> ... verdict", the header line gives the
// code and begins the verdict with `verdict_start`, and nothing names a root cause or a rank
// stopped by the launcher.
inline void expect_launch_reported_verdict(const std::string& output, int ranks, int code,
                                           const std::string& verdict_start, int first_rank = 0) {
  const std::string header = "ddx launch: the job reported a verdict (exit " + std::to_string(code) + ", attempt ";
  const size_t at = output.find(header);
  ASSERT_NE(at, std::string::npos) << "no verdict line:\n" << output;
  const size_t colon = output.find("): ", at);
  ASSERT_NE(colon, std::string::npos) << output;
  EXPECT_EQ(output.compare(colon + 3, verdict_start.size(), verdict_start), 0)
      << "the verdict does not begin with \"" << verdict_start << "\":\n" << output;
  for (int rank = first_rank; rank < first_rank + ranks; ++rank) {
    const std::regex row("\n  " + std::to_string(rank) + " +[0-9]+ +\\S+ +[0-9]+ +exit " + std::to_string(code) +
                         " +verdict\n");
    EXPECT_TRUE(std::regex_search(output, row)) << "rank " << rank << " did not end with the verdict:\n" << output;
  }
  EXPECT_NE(output.find("\nNo rank failed: the job ran to its verdict"), std::string::npos) << output;
  for (const char* blame : {"ROOT CAUSE", "Root cause", "worker group failed", "stopped by launcher"}) {
    EXPECT_EQ(output.find(blame), std::string::npos) << "\"" << blame << "\" after a verdict:\n" << output;
  }
}

}  // namespace ddx::testing
