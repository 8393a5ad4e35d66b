// Stage 03: fused GEMM + online softmax. The logits exist only as on-chip tiles.
// Uses: stage 02's OnlineSoftmax (online_softmax.cuh); common/tile (the tile
// engine: tile products, units, launch); common/token_reduction.
//
// The tile engine computes E·Cᵀ one tile at a time; this stage's epilogue
// folds each tile at once into per-row running max and sum (online_fold.cuh)
// and picks up the target logit as its column passes. A unit of work is a
// token block and a range of vocabulary tiles; its end leaves one (max, sum)
// pair per row and range, and a small kernel merges the ranges of each row
// into the LSE and the loss. The vocabulary is split into ranges so that
// every multiprocessor has work when N/BM is small.
#pragma once

#include <memory>

#include "common/stage.h"
#include "common/tile/tile_path.h"

namespace cce::s03 {

struct FusedPlan {
  TilePath path;
  TileUnits units;
};
// requested_ranges = 0: the path's choice (block-level products: fill one
// wave; the pipeline: balance its persistent blocks); 1: the plain 1D grid.
FusedPlan plan_fused(const Problem& problem, int64_t requested_ranges = 0);

// The scratch of fused_lse: the ranges' (max, sum) pairs, and the target
// logits when the loss is wanted too (with_loss).
std::vector<MemoryItem> fused_lse_scratch(const Problem& problem, const FusedPlan& plan, bool with_loss);

// LSE [N] and, when loss_per_token is not null, the per-token loss [N] (0 for
// ignored tokens). Stage 04 on uses the LSE alone (loss_per_token = null).
void fused_lse(const DeviceInputs& in, const FusedPlan& plan, const Scratch& scratch, float* lse,
               float* loss_per_token, cudaStream_t stream);

// fused_lse's two steps, for a stage that runs an epilogue of its own around
// SplitLseEpilogue (split_lse.cuh): its parameters from the scratch, and the
// merge of the ranges' states into LSE and (target_logit not null) loss.
struct SplitLseParams {
  const int64_t* targets;
  int64_t n, v;
  float softcap;
  float2* partial;      // [ranges·N]: (max, sum) of row i over range r at r·N + i
  float* target_logit;  // [N], or null: LSE only
};
SplitLseParams split_lse_params(const DeviceInputs& in, const Scratch& scratch, bool with_loss);
void merge_ranges(const DeviceInputs& in, const FusedPlan& plan, const SplitLseParams& params, float* lse,
                  float* loss_per_token, cudaStream_t stream);

class FusedGemmCeStage : public ForwardOnlyStage {
 public:
  std::string name() const override { return "03_fused_gemm_ce"; }
  std::string summary() const override { return "fused GEMM + online softmax: logits only as on-chip tiles"; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  std::vector<std::string> report_lines() const override;
  void add_options(OptionParser& parser) override;
  void validate_options() const override;

 private:
  int64_t requested_ranges_ = 0;  // --vocab-splits
  FusedPlan plan_{};
};

std::unique_ptr<Stage> make_stage();

// "T token blocks x S vocabulary ranges of R tiles on B blocks; <path>", for report lines.
std::string describe_plan(const FusedPlan& plan);

}  // namespace cce::s03
