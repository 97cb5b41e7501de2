#pragma once
// Pipeline parallelism (parallelism.md §6): the model's blocks are cut into --pp x V stages
// (pp_stages.h), rank r of the pipeline group holding stages r, r + p, ... with the embedding on
// stage 0 and the final norm, head and loss on the last; a schedule (pp_schedule.h) orders
// each rank's forwards and backwards over the step's micro-batches (-b split into
// --microbatches, times --grad-accum) and the executor (pp_executor.h) runs them, moving
// activations and their gradients with send/recv. The mesh is pp x dp (x tp with --tp M: 3D,
// each stage's blocks split over M consecutive ranks by the parallel layers, exactly as under
// --strategy tp and 2d; the TP ranks of a stage read the same batch). The ranks left over form
// data-parallel replicas of the whole pipeline, each reading its slice of the batch, and an
// existing data-parallel strategy holds each stage (or its TP slices) over the dp dimension:
//   default         FSDP (fsdp_strategy.h, its units and layout unchanged): each stage's
//                   parameters sharded over the dp group, each unit gathered before the
//                   stage's forward and backward of every micro-batch, its gradients
//                   accumulated over the step and reduce-scattered once, after its last backward;
//   --dp-replicate  (or no dp dimension) the stage replicated, its gradients summed over the dp
//                   group after the step in DDP's buckets (grad_buckets.h).
//  - loss: every stage scales by 1 / global tokens of the step, so gradients are those of the
//    single-device step; the last stage's loss sum is broadcast over the pipeline;
//  - gradients: a tied embedding (GPT-2's wte, used by stage 0 and by the head) is held by the
//    first and the last stage and its two gradients summed over the pipeline (Megatron's
//    embedding group) after the data-parallel reduction;
//  - clipping: the norm's squares are summed over the pipeline (and FSDP's rows over dp), a
//    tied parameter counted once;
//  - checkpoints: sharded, each rank writing its stages' parameters (rows split over the dp
//    ranks) as pieces of the full tensors (sharded_checkpoint.h), so a pipeline checkpoint
//    loads under any strategy and any checkpoint loads here, each rank reading its stages'.
#include <memory>

#include "strategies/strategy.h"

namespace ddx::train {

// `--strategy pp` on the dimensions `dims`: over FSDP (with `fsdp`) on the data-parallel
// dimension unless --dp-replicate (or the world leaves none).
std::unique_ptr<Strategy> make_pp_strategy(const PpOptions& pp, const FsdpOptions& fsdp, const ParallelDims& dims);

}  // namespace ddx::train
