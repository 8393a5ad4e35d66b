// Stage 05: a 2D-grid log-sum-exp, merged across vocabulary blocks under a lock.
// Uses: stage 03's fold (online_fold.cuh) and FusedPlan; stage 04's indexed
// dot and finalize_token_loss; common/tile; common/token_reduction.
//
// Each unit of the tile engine (a token block × a range of vocabulary tiles:
// one tile per thread block on the block-level products, a few tiles on the
// Hopper pipeline) folds its tiles into a partial LSE per row, then takes
// its token block's spin lock and merges the partials into the global fp32
// LSE with logaddexp (locked_lse.cuh). No partials are stored and no second
// kernel merges them. Units run in groups of token blocks so that blocks
// running together share tiles of C (and of E) in L2.
// Loss = LSE − softcap(C_t·E_i), the target term from stage 04's kernel.
// Device memory besides inputs and outputs: a lock per token block, the
// target dot [N] and, for mean and sum, the per-token loss [N].
#pragma once

#include <memory>

#include "common/stage.h"
#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"

namespace cce::s05 {

constexpr int64_t kGroupTokenBlocks = 8;     // block-level products: token blocks per group
constexpr int64_t kMaxPipelineRanges = 64;   // the pipeline: at most this many units per token block

s03::FusedPlan plan_locked(const Problem& problem);
// A lock per team's rows: per token block, or per 64 rows on the pipeline.
int64_t lock_count(const s03::FusedPlan& plan);
std::vector<MemoryItem> locked_lse_scratch(const Problem& problem, const s03::FusedPlan& plan);
// Sets LSE to −inf and the locks to 0 before a locked merge kernel runs.
void prepare_locked_lse(const Problem& problem, const s03::FusedPlan& plan, const Scratch& scratch, float* lse,
                        cudaStream_t stream);
void locked_lse(const DeviceInputs& in, const s03::FusedPlan& plan, const Scratch& scratch, float* lse,
                cudaStream_t stream);

// The whole forward of this stage (LSE under locks, the indexed dot, the loss),
// for the later stages that keep it.
std::vector<MemoryItem> forward_scratch(const Problem& problem);
void forward(const DeviceInputs& in, Scratch& scratch, float* loss, float* lse, cudaStream_t stream);
// The rest of that forward once the LSE is known: the dot, the per-token loss, the reduction.
void finish_forward(const DeviceInputs& in, const Scratch& scratch, float* loss, const float* lse, cudaStream_t stream);
// Its report line for a problem: the grid and the tile product.
std::vector<std::string> report_locked_plan(const Problem& problem);

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s05
