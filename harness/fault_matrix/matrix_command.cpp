// `ddx fault matrix` on the command line: check the options, run the clean reference, then
// every selected row in turn (a progress line, then its table row as soon as it is judged),
// write the reports; exit 0 only when the reference and every row passed.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "ddx/processes/env.h"
#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"
#include "ddx/text/text.h"
#include "harness/common/output_folder.h"
#include "harness/fault_matrix/matrix.h"
#include "harness/fault_matrix/matrix_command.h"
#include "harness/fault_matrix/matrix_nodes.h"

namespace ddx::cli {
namespace {
namespace fm = faults::matrix;

std::string kind_names() {
  std::vector<std::string> names;
  for (const auto& r : fm::row_specs()) names.push_back(r.kind);
  return join(names);
}

// The detectors the self-test can turn off: those that need a flag.
std::string switchable_detectors() {
  std::vector<std::string> names;
  for (const auto& d : fm::detectors()) {
    if (!d.flags.empty()) names.push_back(d.name);
  }
  return join(names);
}

std::vector<fm::RowSpec> selected_rows(const fm::Options& o) {
  std::vector<fm::RowSpec> rows;
  for (const std::string& kind : o.kinds) {
    auto it = std::find_if(fm::row_specs().begin(), fm::row_specs().end(), [&](const auto& r) { return r.kind == kind; });
    if (it == fm::row_specs().end()) {
      throw UsageError("--kinds: no matrix row for fault kind '" + kind + "' (rows: " + kind_names() + ")");
    }
  }
  for (const auto& r : fm::row_specs()) {
    if (o.kinds.empty() || std::find(o.kinds.begin(), o.kinds.end(), r.kind) != o.kinds.end()) rows.push_back(r);
  }
  return rows;
}

void check(const fm::Options& o) {
  for (const std::string& name : o.without) {
    const fm::Detector* d = fm::find_detector(name);
    if (d == nullptr || d->flags.empty()) {
      throw UsageError("--without: '" + name + "' is not a detector that can be turned off (valid: " +
                       switchable_detectors() + ")");
    }
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw UsageError("--node-rank " + std::to_string(o.node_rank) + " is outside [0, " + std::to_string(o.nnodes) +
                     ") for --nnodes " + std::to_string(o.nnodes));
  }
  if (o.nnodes > 1 && o.master_port == 0) {
    throw UsageError("--master-port is required with --nnodes > 1 (node 0 hosts the matrix's store on it)");
  }
  if (o.master_port < 0 || o.master_port > 65533) {
    // The jobs rendezvous at the next port, and at the one after that once restarted (ddx launch).
    throw UsageError("--master-port " + std::to_string(o.master_port) +
                     " is outside 1..65533 (the matrix's store; its jobs use the next two ports)");
  }
  const int world = o.nproc * o.nnodes;
  const int rank = o.fault_rank >= 0 ? o.fault_rank : world - 1;
  if (rank >= world) {
    throw UsageError("--fault-rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world) +
                     " rank(s)");
  }
  if (o.fault_step > o.max_steps) {
    throw UsageError("--fault-step " + std::to_string(o.fault_step) + " is past --max-steps " + std::to_string(o.max_steps));
  }
  if (o.fault_step <= o.ckpt_freq) {
    throw UsageError("--fault-step " + std::to_string(o.fault_step) + " must come after the first checkpoint (--ckpt-freq " +
                     std::to_string(o.ckpt_freq) + "): the restarted job resumes from one");
  }
  // The reference run must be clean: an inherited DDX_FAULT would reach every job.
  if (const char* leaked = std::getenv("DDX_FAULT"); leaked != nullptr && *leaked != '\0') {
    throw UsageError(std::string("DDX_FAULT is set (") + leaked + "); the matrix injects its own faults, unset it");
  }
}

// Across nodes the others' matrices must outlive every exchange: node 0 sends the final status
// and keeps the store up until every node has it.
int finish(const fm::Options& o, bool passed) {
  if (o.nodes == nullptr) return passed ? 0 : 1;
  passed = o.nodes->broadcast("status", passed ? "PASS" : "FAIL") == "PASS";
  o.nodes->gather("done", "");
  return passed ? 0 : 1;
}

int run_matrix(fm::Options& o) {
  check(o);
  const auto rows = selected_rows(o);
  // Every row is judged from what its job leaves in --out: node 0 moves an earlier run's files
  // aside (never deleting them) before it hosts the nodes' store, so a node that reaches the
  // store finds the folder fresh even where all share it.
  if (o.node_rank == 0) {
    const std::string moved = harness::fresh_output_folder("--out", o.out_dir);
    if (!moved.empty()) {
      std::printf("fault matrix: %s held an earlier run's files: moved them to %s\n", o.out_dir.c_str(), moved.c_str());
    }
  }
  std::unique_ptr<fm::NodeLink> nodes;
  std::string where = "ddx launch -np " + std::to_string(o.nproc);
  if (o.nnodes > 1) {
    // Long enough for node 0 to wait out a row's job and its judging.
    nodes = fm::connect_nodes(o.master_addr, o.master_port, o.nnodes, o.node_rank, o.row_timeout_s + 300);
    if (o.node_rank != 0) std::filesystem::create_directories(o.out_dir);
    o.nodes = nodes.get();
    where += " on each of " + std::to_string(o.nnodes) + " nodes (this is node " + std::to_string(o.node_rank) +
             (o.node_rank == 0 ? ", which judges)" : "; node 0 judges)");
  }
  std::printf("fault matrix: %zu row(s), ddx train --strategy %s -m %s under %s; fault at step %d, "
              "checkpoints every %d, %d steps%s\n",
              rows.size(), o.strategy.c_str(), o.model.c_str(), where.c_str(), o.fault_step, o.ckpt_freq, o.max_steps,
              o.without.empty() ? "" : ("; detectors off: " + join(o.without)).c_str());
  std::printf("[ref] clean reference run ...\n");
  std::fflush(stdout);
  const fm::Reference reference = fm::run_reference(o, rows);
  // Every row's job would be refused the same way: say so once instead of failing each row.
  if (!reference.refused.empty()) throw UsageError(reference.refused + " (log: " + reference.log + ")");
  const std::string judged = o.node_rank == 0 ? std::to_string(reference.curve.size()) + " steps" : "judged by node 0";
  std::printf("[ref] %s (%.1f s, %s)%s%s\n", reference.ok ? "PASS" : "FAIL", reference.seconds, judged.c_str(),
              reference.ok ? "" : ": ", reference.note.c_str());
  if (!reference.ok) std::printf("    log: %s\n", reference.log.c_str());
  std::printf("%s\n", fm::table_header().c_str());
  std::fflush(stdout);
  std::vector<fm::RowResult> results;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("[%zu/%zu] %s: %s ...\n", i + 1, rows.size(), rows[i].kind.c_str(),
                join(fm::row_faults(o, rows[i]), " + ").c_str());
    std::fflush(stdout);
    results.push_back(fm::run_row(o, rows[i], reference));
    const fm::RowResult& r = results.back();
    if (o.node_rank != 0 && !r.skipped) {
      std::printf("node %d's part: exit %d, %.1f s, %d process(es) left; log %s\n", o.node_rank, r.exit_code, r.seconds,
                  r.leftover_processes, r.log.c_str());
    }
    std::printf("%s\n", r.table.empty() ? fm::table_row(r).c_str() : r.table.c_str());
    std::fflush(stdout);
  }
  // A skipped row (its job could not run here) is not a failure of what it tests, and its line
  // says why; but a matrix with one is INCOMPLETE, never a PASS (exit 1 either way).
  const bool passed = reference.ok && std::all_of(results.begin(), results.end(), [](const auto& r) { return r.passed; });
  const char* verdict = fm::verdict_word(reference, results);
  if (o.node_rank != 0) {
    std::printf("%s: %s; node 0 writes the reports\n", fm::summary_line(results).c_str(), verdict);
    return finish(o, passed);
  }
  fm::write_reports(o, reference, results);
  std::printf("%s: %s; report %s/report.json (also junit.xml, table.txt)\n", fm::summary_line(results).c_str(), verdict,
              o.out_dir.c_str());
  return finish(o, passed);
}

}  // namespace

Subcommand add_fault_matrix_command(CLI::App& fault) {
  auto o = std::make_shared<fm::Options>();
  auto np_marker = std::make_shared<bool>(false);
  CLI::App* cmd = fault.add_subcommand(
      "matrix",
      "Inject every fault kind in turn into a small training job under ddx launch and check that "
      "it is detected, its culprit named, nothing left running, the checkpoints intact and the job "
      "recovered bit-identically; one row per fault, report.json, JUnit XML.\n"
      "  ddx fault matrix --strategy ddp -np 4 --out fault-matrix");
  // `-np 4` as for ddx launch: CLI11 reads it as -n -p, so -n is a hidden marker for -p.
  cmd->add_option("-p,--nproc,--np", o->nproc, "Ranks of each job on each node (ddx launch -np; also -np N)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_flag("-n", *np_marker)->group("");
  cmd->add_option("--strategy", o->strategy, "ddx train --strategy of every job")->capture_default_str();
  cmd->add_option("-m,--model", o->model, "ddx train --model of every job")->capture_default_str();
  // One comma-separated value each: a list option that took several words would swallow the
  // `--` before the ddx train arguments (`--kinds kill -- --tp 2` was refused as an unknown --tp).
  cmd->add_option("--kinds", o->kinds, "Only these rows (comma-separated): " + kind_names())
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--without", o->without,
                  "Leave these detectors' flags out (the self-test: their rows must FAIL): " + switchable_detectors())
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--out", o->out_dir, "Folder for the reports and every job's folder")->capture_default_str();
  cmd->add_option("--fault-rank", o->fault_rank, "Rank the faults target (default: the last)");
  cmd->add_option("--fault-step", o->fault_step, "Step the faults fire at")->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--ckpt-freq", o->ckpt_freq, "Steps between checkpoints")->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--max-steps", o->max_steps, "Steps of each job")->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--collective-timeout", o->collective_timeout_s, "Seconds before a hung collective is diagnosed")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--row-timeout", o->row_timeout_s, "Seconds before a row's job is killed and the row FAILs")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--nnodes", o->nnodes, "Nodes: run the matrix once on each (srun), the same rows in lock-step")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--node-rank", o->node_rank, "This node's rank in [0, nnodes); node 0 judges and writes the reports")
      ->capture_default_str();
  cmd->add_option("--master-addr", o->master_addr, "Address of node 0, which hosts the matrix's store")
      ->capture_default_str();
  cmd->add_option("--master-port", o->master_port,
                  "Port of the matrix's store on node 0 (with --nnodes > 1); the jobs rendezvous at the next port")
      ->capture_default_str();
  cmd->add_option("train-args", o->train_args, "Further ddx train arguments for every job, after --");
  return {cmd, [o, np_marker, cmd]() {
            if (*np_marker && cmd->count("-p") == 0) throw UsageError("ddx fault matrix: -n is not a flag; use -np N");
            // `srun -N 2 --ntasks-per-node 1 ddx fault matrix`: the nodes from the step.
            const bool nodes_given = cmd->count("--nnodes") + cmd->count("--node-rank") + cmd->count("--master-addr") +
                                     cmd->count("--master-port") > 0;
            if (auto step = nodes_given ? std::nullopt : slurm_step_nodes(current_env(), "ddx fault matrix")) {
              o->nnodes = step->nnodes;
              o->node_rank = step->node_rank;
              o->master_addr = step->master_addr;
              o->master_port = step->master_port;
              std::fprintf(stderr, "%s\n", step->said.c_str());
            }
            return run_matrix(*o);
          }};
}

}  // namespace ddx::cli
