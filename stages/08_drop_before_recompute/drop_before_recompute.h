// Stage 08: drop tiles before recomputing them, and correct what is dropped.
// Uses: stage 03's fold (online_fold.cuh) inside the forward's epilogue;
// stage 03's split forward (for a loss alone); stage 06's tile backward
// (backward_tile.cuh, prepare_backward/finish_backward); common/tile (tile
// products whose columns follow an order, the units); cuBLAS (two small
// GEMMs); cub (one radix sort).
//
// Forward, when a backward will follow (sorted_forward.cu):
//   1. key_j = C_j·Σ_i E_i (one GEMV): the vocabulary sorted by descending
//      key, its average logit, known before any tile is computed;
//   2. the fused forward over the sorted vocabulary, a gathered chunk of C at
//      a time; its epilogue (tile_stats.cuh) folds the LSE and keeps, per row
//      i and tile T of sorted entries, (m_iT, s_iT): the tile's largest logit
//      and its sum of exponentials; the gather also sums each tile's mean row C̄_T;
//   3. the ranges' (max, sum) merged in a fixed order: LSE, loss.
// Backward (decision.cu, tail_correction.cu, kept_backward.cu):
//   1. decide: (token block b, tile T) is kept iff a row i of b has
//      exp(m_iT − LSE_i) ≥ eps, the bound on every softmax entry of the tile;
//   2. correct what is dropped: M_iT = s_iT·exp(m_iT − LSE_i) is the dropped
//      tile's softmax mass; dE_i += g_i Σ_T M_iT C̄_T and each row of T gets
//      G_T/|T| of dC with G_T = Σ_i g_i M_iT E_i (two GEMMs);
//   3. stage 06's tile backward over the kept pairs only (fp32 atomics);
//   4. the targets in dropped tiles, exactly: dE_i += a_i C_{t_i},
//      dC_{t_i} += a_i E_i with a_i = g_i (p_{i,t_i} − 1)·softcap'(z_{i,t_i}).
// README.md derives each step and gives the measurements.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/stage.h"

namespace cce::s08 {

// ------------------------------------------------------------------ tiles
// The tiles of the decision are the backward's: 128 × 128 (bf16), 64 × 64 (fp32).
inline int64_t backward_tile(Dtype dtype) { return dtype == Dtype::kBFloat16 ? 128 : 64; }
struct TileGrid {
  int64_t tile_rows = 0, tile_cols = 0;
  int64_t tiles = 0;         // ⌈V / tile_cols⌉ tiles of the sorted vocabulary
  int64_t token_blocks = 0;  // ⌈N / tile_rows⌉
  int64_t pairs() const { return tiles * token_blocks; }
};
TileGrid tile_grid(const Problem& problem);

// The default eps: 2^-8 (bf16), 2^-28 (fp32); README.md, "Choosing eps".
float default_drop_eps(Dtype dtype);
// "eps 2^-8", "eps 0.003", or "off (every tile kept)" for 0: the report lines' words.
std::string describe_eps(float eps);

// ---------------------------------------------------- forward (sorted_forward.cu)
// A loss alone keeps nothing: stage 03's split forward, with few ranges
// (drop_before_recompute.cu).
std::vector<MemoryItem> loss_only_items(const Problem& problem);
void loss_only_forward(const DeviceInputs& in, const Scratch& scratch, float* loss, float* lse, cudaStream_t stream);

struct SortedForwardPlan {
  int64_t chunk_rows = 0;  // rows of sorted C gathered at once (a multiple of 256, or V)
  int64_t ranges = 0;      // most vocabulary ranges of a chunk's units
  size_t work_bytes = 0;   // the work buffer: the sort's temporaries, then a gathered chunk
};
// chunk_rows 0: as many rows as kDefaultChunkBytes of C.
constexpr size_t kDefaultChunkBytes = size_t{64} << 20;
SortedForwardPlan plan_sorted_forward(const Problem& problem, int64_t chunk_rows = 0);
size_t sort_work_bytes(int64_t v);  // the sort's temporaries

// What the forward leaves for the backward.
struct TileStatistics {
  int* vocabulary_order = nullptr;     // [V]: sorted position → vocabulary entry
  int64_t* target_position = nullptr;  // [N]: sorted position of t_i, −1 for ignored tokens
  float* target_logit = nullptr;       // [N]: z_{i,t_i} (softcapped), 0 for ignored tokens
  uint32_t* stats = nullptr;           // [tiles][N]: (m_iT, s_iT) packed (tile_stats.cuh)
  void* tile_means = nullptr;          // [tiles][D]: C̄_T in the input dtype
};
// The forward's buffers: what it leaves, and what it needs only while it runs.
struct SortedForwardBuffers {
  TileStatistics kept;
  float* e_column_sums = nullptr;  // [⌈N/256⌉ + 1][D]: partial sums, then Σ_i E_i
  float2* range_states = nullptr;  // [ranges][N]: (max, sum) of each row over a range
  float2* row_states = nullptr;    // [N]: the running (max, sum) over the chunks
  unsigned char* work = nullptr;   // plan.work_bytes
  unsigned* gather_counts = nullptr;  // the pipeline's gather of a chunk: its counts (common/tile/row_gather.cuh)
};
// The memory model of these buffers (the stage's workspace items), and the
// buffers themselves once allocated: the one place that names them.
std::vector<MemoryItem> sorted_forward_items(const Problem& problem, const SortedForwardPlan& plan);
SortedForwardBuffers sorted_forward_buffers(const Scratch& scratch);
void sorted_forward(const DeviceInputs& in, const SortedForwardPlan& plan, const SortedForwardBuffers& buffers,
                    float* loss, float* lse, const Scratch& scratch, cudaStream_t stream);
// sorted_forward in two halves, for a caller that combines the rows' states
// of several vocabularies in between: the first leaves each row's (max, sum)
// in row_states and its target logit (0 where the target is not in this
// vocabulary) in kept.target_logit; the second turns them into LSE and loss.
void sorted_forward_states(const DeviceInputs& in, const SortedForwardPlan& plan, const SortedForwardBuffers& buffers,
                           cudaStream_t stream);
void sorted_forward_finish(const DeviceInputs& in, const SortedForwardBuffers& buffers, float* loss, float* lse,
                           const Scratch& scratch, cudaStream_t stream);
// sorted_forward_states's two steps: the vocabulary sorted by key_j into
// kept.vocabulary_order (the sort's temporaries in the work buffer), then the
// forward over the vocabulary in the order kept.vocabulary_order holds.
void sort_vocabulary(const DeviceInputs& in, const SortedForwardBuffers& buffers, cudaStream_t stream);
void forward_in_order(const DeviceInputs& in, const SortedForwardPlan& plan, const SortedForwardBuffers& buffers,
                      cudaStream_t stream);

// ------------------------------------------------------------ the decision (decision.cu)
// Token blocks are blocks of rows in an order: rows of block b are
// token_order[b·tile_rows ..], and token_place is its inverse; both null
// means the rows' own order (block b holds rows b·tile_rows ..).
struct TokenBlocks {
  const int* token_order = nullptr;  // [N]
  const int* token_place = nullptr;  // [N]
};
struct DecisionInputs {
  const TileStatistics* forward;
  const float* lse;         // [N]
  const float* grad_scale;  // [N]: g_i, 0 for ignored tokens
  TokenBlocks blocks;
};
// keep[T][b] = 1 iff (b, T) is kept at eps (eps 0: every pair with a row
// with a gradient); kept_per_tile[T] counts T's kept token blocks.
void decide_kept_pairs(const Problem& problem, const TileGrid& grid, const DecisionInputs& inputs, float eps,
                       uint8_t* keep, int* kept_per_tile, cudaStream_t stream);
// a_i = g_i (p_{i,t_i} − 1)·softcap'(z_{i,t_i}) where t_i's tile is dropped for
// i's token block, 0 where it is kept (the recomputed tile holds the target).
void target_coefficients(const Problem& problem, const TileGrid& grid, const DecisionInputs& inputs,
                         const uint8_t* keep, float* coefficient, cudaStream_t stream);

// ---------------------------------------------------- the tail correction (tail_correction.cu)
// Where G_T = Σ_i g_i M_iT E_i go: fp32, tile T's D values at sums + T·ld.
struct TailSums {
  float* sums = nullptr;  // null: dC is not corrected
  int64_t ld = 0;
};
// dE_acc = Σ_T g_i M_iT C̄_T over each row's dropped tiles (overwrites dE_acc),
// and G into tail (unless tail.sums is null). Overwrites the tile statistics
// with M: the decision must be made before.
void correct_dropped_tail(const DeviceInputs& in, const TileGrid& grid, const DecisionInputs& inputs,
                          const uint8_t* keep, float* de_acc, const TailSums& tail, cudaStream_t stream);

// ------------------------------------------ the backward over kept pairs (kept_backward.cu)
// The kept pairs (token block, tile), tile by tile, token blocks ascending.
std::vector<int2> kept_pair_list(const TileGrid& grid, const std::vector<uint8_t>& keep);
struct KeptBackwardInputs {
  const int2* pairs = nullptr;  // [pair_count], on the device
  int64_t pair_count = 0;
  const int* vocabulary_order = nullptr;
  const float* lse = nullptr;
  const float* grad_scale = nullptr;
  float* de_acc = nullptr;  // [N][D] fp32
  float* dc_acc = nullptr;  // [V][D] fp32
};
// dE_acc += S·C and dC_acc += Sᵀ·E over each kept pair's recomputed S (atomics).
void backward_over_kept_pairs(const DeviceInputs& in, const KeptBackwardInputs& kept, cudaStream_t stream);
// dC_acc row of each entry of tile T += G_T / |T|.
void add_tail_share(const Problem& problem, const TileGrid& grid, const TailSums& tail, const int* vocabulary_order,
                    float* dc_acc, cudaStream_t stream);
// dE_acc_i += a_i C_{t_i}, dC_acc_{t_i} += a_i E_i (target_coefficients' a).
void add_target_terms(const DeviceInputs& in, const float* coefficient, float* de_acc, float* dc_acc,
                      cudaStream_t stream);

// --------------------------------------------------------------------- the stage
struct DropStats {
  int64_t pairs = 0, kept_pairs = 0;  // (token block, vocabulary tile) pairs
  float eps = 0.0f;
};

class DropBeforeRecomputeStage : public Stage {
 public:
  std::string name() const override { return "08_drop_before_recompute"; }
  std::string summary() const override {
    return "tiles dropped before they are recomputed, from the forward's tile statistics; the dropped tail corrected";
  }
  bool has_backward() const override { return true; }
  void expect_backward(bool yes) override { backward_follows_ = yes; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  void add_options(OptionParser& parser) override;
  void validate_options() const override;
  std::vector<std::string> report_lines() const override;
  // The dropped tiles hold entries below eps, and their mass is added back
  // over each tile unless --no-correction.
  GradientApproximation gradient_approximation() const override {
    return {drop_eps(last_problem_.dtype), !no_correction_};
  }

  float drop_eps(Dtype dtype) const;  // 0: every tile kept
  DropStats stats() const { return stats_; }
  std::vector<int> vocabulary_order() const;  // of the last forward with a backward (for the tests)
  std::vector<uint8_t> keep_flags() const;    // of the last backward, [tiles][token blocks] (for the tests)

 private:
  double eps_flag_ = 0.0;      // --drop-eps; 0: default_drop_eps
  int64_t chunk_rows_flag_ = 0;  // --chunk-rows; 0: kDefaultChunkBytes of C
  bool keep_all_ = false, no_correction_ = false;
  bool backward_follows_ = false, statistics_ready_ = false;
  Problem last_problem_;
  DropStats stats_;
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s08
