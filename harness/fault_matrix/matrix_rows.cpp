// The fault matrix's rows: one line per fault kind, the only place that knows what each row
// injects and expects. A process that dies is named by the launcher; a rank that stops issuing
// collectives by the watchdog's timeout and the analyzer's verdict; silent corruption by the
// detectors that exist for it; a bad checkpoint by its checksum on resume (the kill at {step}
// makes the job resume over it). Rows that stop the job run with one restart and must end
// bit-identical to the clean reference; slowness stops nothing, so there is nothing to recover.
// The launcher must also name how the rank ended (its signal or exit code), and a recovered job
// must have resumed from the checkpoint the row expects, which for a bad checkpoint is the one
// before it. A lost store is named by the ranks that lose it, each naming the rank that hosted it.
// A slow link only lengthens collectives, which every rank of a training job waits in alike, so
// the pairwise bandwidth probe, which times each link on its own, is the job that names it.
// shm-full fills /dev/shm, so its job gets a private one of Docker's default size (never the
// node's, which other jobs use); the rank's fatal-signal report names the full tmpfs, and the
// fault's files go with the rank, so the restarted group finds the tmpfs free again.
#include "harness/fault_matrix/matrix.h"

namespace ddx::faults::matrix {

const std::vector<RowSpec>& row_specs() {
  static const std::vector<RowSpec> rows = {
      // kind               job      faults                                                   detector             culprit                  how        recovers resumes from
      {"kill",               "train", "kill@rank={rank},step={step}",                         "launcher",          "rank {rank}",            "SIGKILL", true,  "{ckpt}"},
      {"segfault",           "train", "segfault@rank={rank},step={step}",                     "launcher",          "rank {rank}",            "SIGSEGV", true,  "{ckpt}"},
      {"abort",              "train", "abort@rank={rank},step={step}",                        "launcher",          "rank {rank}",            "SIGABRT", true,  "{ckpt}"},
      {"exit",               "train", "exit@rank={rank},step={step},code=3",                  "launcher",          "rank {rank}",            "exit 3",  true,  "{ckpt}"},
      // An uncaught C++ exception (std::bad_alloc here, a filesystem error for disk-full) ends in
      // std::terminate: SIGABRT, after the rank's error report.
      {"oom",                "train", "oom@rank={rank},step={step},mib=64",                   "launcher",          "rank {rank}",            "SIGABRT", true,  "{ckpt}"},
      {"hang",               "train", "hang@rank={rank},step={step}",                         "watchdog+analyzer", "rank {rank}",            "",        true,  "{ckpt}"},
      {"skip-collective",    "train", "skip-collective@rank={rank},step={step}",              "watchdog+analyzer", "rank {rank}",            "",        true,  "{ckpt}"},
      {"mismatch",           "train", "mismatch@rank={rank},step={step}",                     "collective check",  "rank {rank}",            "",        true,  "{ckpt}"},
      {"store-loss",         "train", "store-loss@rank=0,step={step}",                        "store check",       "rank 0",                 "",        true,  "{last}"},
      {"slow-link",          "pairs", "slow-link@rank={rank},op=send,ms=50",                  "pairwise links",    "rank {rank}",            "",        false},
      {"straggler",          "train", "straggler@rank={rank},factor=10",                      "straggler warning", "rank {rank}",            "",        false},
      {"nan",                "train", "nan@rank={rank},step={step}",                          "nan-check",         "rank {rank}",            "",        true,  "{ckpt}"},
      {"bitflip",            "train", "bitflip@rank={rank},step={step}",                      "replica-check",     "rank {rank}",            "",        true,  "{ckpt}"},
      {"corrupt-collective", "train", "corrupt-collective@rank={rank},step={step}",           "replica-check",     "rank {rank}",            "",        true,  "{ckpt}"},
      // The checkpoint of step {ckpt} is torn, corrupt or never written: the job must come back
      // from the one before it, not from scratch.
      {"ckpt-torn",          "train", "ckpt-torn@rank=0,step={ckpt}",                         "launcher",          "rank 0",                 "SIGKILL", true,  "{prev}"},
      {"ckpt-corrupt",       "train", "ckpt-corrupt@rank=0,step={ckpt};kill@rank={rank},step={step}", "checksum",  "checkpoint step {ckpt}", "",        true,  "{prev}"},
      {"disk-full",          "train", "disk-full@rank=0,step={ckpt}",                         "launcher",          "rank 0",                 "SIGABRT", true,  "{prev}"},
      {"shm-full",           "train", "shm-full@rank={rank},step={step}",                     "bus-error cause",   "rank {rank}",            "",        true,  "{ckpt}", "64m"},
  };
  return rows;
}

}  // namespace ddx::faults::matrix
