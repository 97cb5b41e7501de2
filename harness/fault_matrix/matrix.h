#pragma once
// `ddx fault matrix`: the user's proof that every fault is caught. Each fault kind runs in turn
// under `ddx launch` on a small training job; each row's evidence is read back from what the job
// left (the job events its launcher, detectors and recovery recorded in events.jsonl, the
// analyzer's verdict JSON, metrics.jsonl, the checkpoint folders), never from knowing what was
// injected, and never from the wording of a log line; the expected
// side of each row (which fault, which detector must name which culprit, whether the job must
// come back) is one line of row_specs(). A clean reference run comes first, with the detectors of
// every selected row on: recovered rows must equal it bit for bit, and no detector may fire on it.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ddx/watchdog/job_event_records.h"

namespace ddx::faults::matrix {

class NodeLink;  // matrix_nodes.h

// One line of the matrix: adding a fault kind to the matrix adds one of these.
// In `faults`, `culprit` and `resumes_from`, {rank} is the faulted rank, {step} the fault step,
// {ckpt} the last checkpoint step before it and {prev} the checkpoint step before that one.
struct RowSpec {
  std::string kind;
  std::string job;       // "train": the training job; "pairs": the pairwise bandwidth probe
  std::string faults;    // --fault specs (DDX_FAULT for the probe), several separated by ';'
  std::string detector;  // the detector (detectors()) that must name the culprit
  std::string culprit;   // what it must name: "rank {rank}", "checkpoint step {ckpt}"
  // How the launcher must say the culprit ended ("SIGKILL", "exit 3"): a rank that died some
  // other way is another failure than the one injected. Empty for the other detectors.
  std::string how;
  bool recovers;         // run with --max-restarts 1: must resume and end bit-identical to the reference
  // With recovers: the checkpoint step the restarted job must resume from ("0": from scratch;
  // "{last}": the newest checkpoint the job wrote before it failed, for a fault noticed late).
  // A restart from scratch, or from another checkpoint, also ends bit-identical on this
  // deterministic job, so the curve alone cannot tell a resume that works from one that does not.
  std::string resumes_from = "";
  // Non-empty: the job gets a private /dev/shm of this size (ddx launch --shm-size), so a fault
  // that fills it never touches the node's own; where that is refused the row is SKIPPED.
  std::string shm_size = "";
};
const std::vector<RowSpec>& row_specs();

struct Options {
  int nproc = 4;
  std::string strategy = "ddp";
  std::string model = "debug";
  std::vector<std::string> kinds;    // empty: every row
  std::vector<std::string> without;  // detectors whose flags are left out (the self-test)
  std::string out_dir = "fault-matrix";
  int fault_rank = -1;               // -1: the last rank
  int fault_step = 13;
  int ckpt_freq = 5;
  int max_steps = 16;
  double collective_timeout_s = 5;
  double row_timeout_s = 180;
  std::vector<std::string> train_args;  // extra `ddx train` arguments (after --)
  // Across nodes (matrix_nodes.h): nproc ranks on each of nnodes nodes; node 0 hosts the matrix's
  // store at master_addr:master_port and the jobs rendezvous at master_port + 1.
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  NodeLink* nodes = nullptr;  // set by the command when nnodes > 1
};

// One record of a job's events.jsonl (ddx/watchdog/job_events.h), as every node's processes wrote it.
using JobEvent = events::Recorded;

// What one job left behind, for the detectors to read.
struct JobEvidence {
  std::vector<JobEvent> events;  // every node's, in the order they were recorded
  int64_t start_unix_us = 0;     // when the job was started (on node 0)
  std::string dir;               // the job's folder (out/, traces/, metrics.jsonl, final.safetensors)

  // Seconds from the job's start to the event.
  double at_s(const JobEvent& e) const { return static_cast<double>(e.unix_us - start_unix_us) / 1e6; }
  // The first event named `name` for which `keep` holds, or nullptr.
  template <typename Keep>
  const JobEvent* first(const std::string& name, Keep keep) const {
    for (const JobEvent& e : events) {
      if (e.name == name && keep(e.record)) return &e;
    }
    return nullptr;
  }
  const JobEvent* first(const std::string& name) const {
    return first(name, [](const nlohmann::json&) { return true; });
  }
};

// What a detector found: whether it fired, whom it named ("rank 3", "ranks 0,2",
// "checkpoint step 10") and when.
struct Finding {
  bool fired = false;
  std::string culprit;
  double at_s = -1;
  std::string evidence;  // the event (or verdict) it was read from
  std::string how;       // the launcher's: how the rank ended ("SIGKILL", "exit 3")
};

// A detector as the matrix sees it: the `ddx train` flags that turn it on (empty: always on)
// and how to read its finding from a job's evidence.
struct Detector {
  std::string name;
  std::vector<std::string> flags;  // turn it on (as the matrix sets it)
  Finding (*find)(const JobEvidence&);
  std::vector<std::string> off_flags = {};  // turn it off, where ddx train has it on by default (--without)
};
const std::vector<Detector>& detectors();
const Detector* find_detector(const std::string& name);

struct RowResult {
  std::string kind;
  std::vector<std::string> faults;
  int rank = -1;  // of the first fault; -1: every rank
  int step = -1;  // of the first fault; -1: every step
  std::string expected_detector;
  std::vector<std::string> detected_by;  // every detector that fired, "name (culprit)"
  bool detected = false;                 // the expected detector fired
  std::string culprit_expected;
  std::string culprit_named;
  bool culprit_correct = false;          // the right culprit, ended the right way
  std::string how_expected;              // the launcher rows': "SIGKILL", "exit 3"
  std::string how_named;
  double seconds_to_diagnosis = -1;      // from the fault's own log line to the detector's
  int leftover_processes = 0;
  bool checkpoints_apply = true;         // false for the probe, which writes none
  bool checkpoints_intact = false;
  std::string checkpoints_note;
  bool recovery_applies = false;
  bool recovered = false;
  bool bit_identical = false;
  bool compared = false;                 // a reference existed to compare the recovered run with
  std::string resume_expected;           // the checkpoint step the restart must resume from
  std::string resumed_from;              // where it did ("0": from scratch; "": no restart)
  std::string recovery_note;
  bool passed = false;
  bool skipped = false;                  // not run here (note: why); never a PASS
  std::string note;                      // why it failed, or was skipped
  std::string table;                     // on a node other than 0: node 0's table row for it
  int exit_code = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string log;
};

// The reference run: a clean job whose loss curve and final weights recovered rows must equal.
struct Reference {
  bool ok = false;  // on a node other than 0: node 0's judgement
  std::string note;
  std::vector<std::pair<int64_t, double>> curve;  // (step, loss)
  std::string weights_path;
  double seconds = 0;
  std::string log;
  // Non-empty: ddx train refused the job's flags (a usage error, not a fault): why, naming the
  // rows whose detector flag the strategy refuses. The matrix then stops as a usage error.
  std::string refused;
};

// Running jobs (matrix_job.cpp). row_faults: the row's fault specs for these options.
std::vector<std::string> row_faults(const Options& o, const RowSpec& spec);
Reference run_reference(const Options& o, const std::vector<RowSpec>& rows);
RowResult run_row(const Options& o, const RowSpec& spec, const Reference& reference);

// Reports (matrix_report.cpp): the table's header and rows (printed live), then report.json,
// junit.xml and table.txt, written atomically into o.out_dir.
std::string table_header();
std::string table_row(const RowResult& r);
std::string summary_line(const std::vector<RowResult>& rows);
// "PASS", "FAIL" (a row or the reference failed), or "INCOMPLETE" (nothing failed, a row was
// skipped: not a PASS).
const char* verdict_word(const Reference& reference, const std::vector<RowResult>& rows);
void write_reports(const Options& o, const Reference& reference, const std::vector<RowResult>& rows);

}  // namespace ddx::faults::matrix
