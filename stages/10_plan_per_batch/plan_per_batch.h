// Stage 10: stage 08's drop before recompute, made fast and bitwise
// repeatable, with eps and the token blocks planned per batch.
// (To be split: the deterministic products become stage 09, and this stage
// keeps the plan per batch; README.md.)
// Uses: stage 08's sorted forward with tile statistics, decision and tail
// correction; stage 06's row inputs (backward_tile.cuh); common/tile
// (block-level tile products with a row order); cub (two radix sorts).
//
// Backward (kept_tiles.cu, kept_products.cu):
//   1. plan: by default (bf16) eps is the largest of 2^-8 … 2^-16 whose
//      dropped mass per row, read from the tile statistics, stays within a
//      budget; the token blocks take the rows grouped by how many tiles they need;
//   2. decide and correct the dropped tail (stage 08);
//   3. per chunk of kept tiles: recompute each kept tile's S = g·(p − onehot)·softcap'
//      into a compact buffer, then dC rows (one owner per output tile, over
//      its kept token blocks) and dE += S·C (one owner per output tile):
//      no atomics, a fixed order, bitwise reproducible;
//   4. the targets that fall in dropped tiles, exactly (stage 08's terms, in a fixed order).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "common/stage.h"
#include "common/tile/tile_path.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"

namespace cce::s10 {

using s08::backward_tile;
using s08::default_drop_eps;
using s08::TailSums;

// The automatic eps (bf16's default): per batch, the largest of 2^-8 … 2^-16
// whose dropped softmax mass per row (mean over the rows with a gradient, the
// targets' own entries left out: they are exact) is at most a budget,
// measured on the tile statistics before deciding (README.md, "Choosing eps").
constexpr int kAutoFirstExponent = 8, kAutoLastExponent = 16;
constexpr int kAutoExponents = kAutoLastExponent - kAutoFirstExponent + 1;
constexpr double kDefaultDroppedMass = 0.025;
// Token grouping: the token blocks take the rows sorted by how many tiles hold
// an entry ≥ 2^-kGroupingExponent (most first), so that rows that need many
// tiles share blocks (README.md, step 6, "Group the tokens").
constexpr int kGroupingExponent = 12;
// The exponent it picks from dropped[k] = the mass per row dropped at eps = 2^-(kAutoFirstExponent + k).
int choose_drop_exponent(const double (&dropped)[kAutoExponents], double budget);

// Where S tiles fit in the rows of the tile statistics (4N bytes each):
// low_slots from a row's start, then the rest of the row's row_slots from
// high_offset, past the dC tail sums the row may hold.
struct StatsSlotLayout {
  int64_t row_bytes = 0, low_slots = 0, row_slots = 0, high_offset = 0;
};

// Sizes of everything the stage keeps, from the problem alone.
struct DropPlan {
  int64_t tile_rows = 0, tile_cols = 0;  // backward tile: 128×128 (bf16), 64×64 (fp32)
  int64_t tiles = 0;                     // ⌈V / tile_cols⌉ sorted vocabulary tiles
  int64_t token_blocks = 0;              // ⌈N / tile_rows⌉
  int64_t slot_bytes = 0;                // one recomputed S tile
  int64_t slot_capacity = 0;             // S tiles the work buffer holds at once
  int64_t spill_slot_capacity = 0;       // and the bf16 dE output (free until dE is written last)
  int64_t chunk_rows = 0;                // rows of C the forward gathers at once
  size_t de_accumulator_bytes = 0;       // fp32 dE for bf16 (at the start of the work buffer)
  size_t region_offset = 0, region_bytes = 0;  // then the recomputed S tiles of a chunk
  size_t work_bytes = 0;
  int64_t ranges = 0;                    // the forward's vocabulary ranges per chunk (most)
  // dC's tail sums G_T = Σ_i M_iT E_i (fp32 [tiles][D]) live in the free half
  // of each tile's statistics row once M (bf16) took the first half, when
  // it fits (N ≥ 2D, N even); otherwise in an item of their own.
  bool tail_sums_in_stats = false;
  // bf16: the tile statistics are dead once the decision and the tail
  // correction have read them, so S tiles spill into each statistics row too.
  StatsSlotLayout stats_slots;
  int64_t stats_slot_capacity = 0;  // stats_slots.row_slots · tiles
  // S tiles one backward chunk holds: the work buffer's, the dE output's, the statistics'.
  int64_t chunk_slots() const { return slot_capacity + spill_slot_capacity + stats_slot_capacity; }
};
// chunk_rows: rows of sorted C the forward gathers at once (a multiple of
// 256); 0: as many as the backward's work buffer holds anyway.
// slot_budget: bytes of the work buffer's S tiles (--slot-mb); 0: what a
// backward scratch of 160 MiB leaves beside its fixed items, at least 24 MiB.
DropPlan plan_drop(const Problem& problem, int64_t chunk_rows = 0, size_t slot_budget = 0);

// Where a chunk's recomputed S tiles live: its first region_slots slots in
// the work buffer's region, the rest in the bf16 dE output, which nothing
// reads or writes until the backward's last step writes dE (slot_space.cuh
// finds a slot).
struct SlotSpace {
  void* region = nullptr;
  void* spill = nullptr;  // the dE output (bf16), or null
  int64_t region_slots = 0, spill_slots = 0;
  int64_t slot_bytes = 0;
  // then the rows of the tile statistics, laid out as DropPlan::stats_slots says
  void* stats = nullptr;
  StatsSlotLayout stats_slots;
};

// A second stream (and two events) on which the dE products run beside dC's:
// the dense head of the sorted vocabulary leaves dC few, long blocks.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  void create();  // once, on first use
  ~SideStream();
};

// The backward's choices (the stage's flags): eps, and which corrections run.
struct DropSettings {
  float eps = 0.0f;            // a fixed eps (0: every tile kept), unless dropped_mass > 0
  double dropped_mass = 0.0;   // > 0: eps chosen per batch within this budget (kAutoFirstExponent…)
  bool correct_tail = true, correct_dc = true;
  bool group_tokens = true;    // token blocks of grouped rows (false: rows in their order)
};

// The eps a backward decided with, and what the automatic eps measured for it.
struct EpsChoice {
  float eps = 0.0f;
  double dropped_mass = -1.0;  // with the automatic eps: the mass per row it dropped (−1: a fixed eps)
  std::array<double, kAutoExponents> candidates{};  // and the mass each candidate 2^-8… would drop
};

struct DropStats {
  int64_t tiles = 0, kept_tiles = 0;  // (token block, vocabulary tile) pairs
  int64_t chunks = 0;
  EpsChoice choice;
};

class PlanPerBatchStage : public Stage {
 public:
  std::string name() const override { return "10_plan_per_batch"; }
  std::string summary() const override {
    return "drop tiles before recomputing them, correct the dropped tail, deterministic products";
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
  // The last backward's dropped tiles hold entries below its eps, and their
  // mass is added back over each tile unless --no-correction.
  GradientApproximation gradient_approximation() const override {
    return {stats_.tiles > 0 ? stats_.choice.eps : drop_eps(last_problem_.dtype), !no_correction_};
  }

  // Loss + gradient: every sum in a fixed order, the automatic eps's mass too.
  bool bitwise_reproducible(bool backward) const override { return backward; }

  DropStats stats() const { return stats_; }
  // The sorted vocabulary of the last forward with a backward (for the tests).
  std::vector<int> vocabulary_order() const;
  // The token order of the last backward's token blocks (for the tests).
  std::vector<int> token_order() const;
  // The fixed eps, or the automatic eps's largest candidate; 0: every tile kept.
  float drop_eps(Dtype dtype) const;
  bool automatic_eps(Dtype dtype) const { return dtype == Dtype::kBFloat16 && !keep_all_ && eps_flag_ == 0.0; }
  // The flags as the backward's settings (for backward_to_accumulator).
  DropSettings settings(Dtype dtype) const {
    return {drop_eps(dtype), automatic_eps(dtype) ? dropped_mass_budget() : 0.0, !no_correction_, !no_dc_correction_,
            !no_grouping_};
  }
  // A fixed eps in place of the automatic one (what --drop-eps sets).
  void fix_drop_eps(float eps) { eps_flag_ = eps, keep_all_ = eps <= 0.0f; }
  double dropped_mass_budget() const { return mass_flag_ > 0.0 ? mass_flag_ : kDefaultDroppedMass; }
  bool dropped_mass_flag_set() const { return mass_flag_ > 0.0; }
  // The plan the flags give for p (--chunk-rows, --slot-mb).
  DropPlan plan_for(const Problem& p) const {
    return plan_drop(p, chunk_rows_flag_, static_cast<size_t>(slot_mb_flag_) << 20);
  }
  // The keep flags of the last backward, [tiles][token blocks] (for the tests).
  std::vector<uint8_t> kept_flags() const;

 private:
  double eps_flag_ = 0.0;  // --drop-eps; 0 = the dtype's default (bf16: automatic)
  double mass_flag_ = 0.0;  // --dropped-mass; 0 = kDefaultDroppedMass
  int64_t chunk_rows_flag_ = 0;  // --chunk-rows
  int64_t slot_mb_flag_ = 0;     // --slot-mb
  bool keep_all_ = false, no_correction_ = false, no_dc_correction_ = false, no_grouping_ = false;
  bool backward_follows_ = false;
  bool stats_ready_ = false;
  Problem last_problem_;
  DropStats stats_;
  SideStream side_;
};

std::unique_ptr<Stage> make_stage();

// ---- the stage's steps, one file each (used by the stage class above) ----

// The forward is stage 08's, on this plan's work buffer.
s08::SortedForwardPlan forward_plan(const DropPlan& plan);

// kept_tiles.cu: the decision, the slots, the recomputed S of kept tiles.
struct KeptTiles {
  EpsChoice choice;
  std::vector<int> offsets;  // [tiles + 1]: tile T's kept token blocks are slots offsets[T]..offsets[T+1]
  std::vector<int> tiles_with_slots;  // ascending: the tiles with at least one kept token block (also on the device)
  std::vector<int> block_lists;       // [token blocks][1 + tiles]: count, then the kept tiles ascending (also on the device)
  int64_t kept() const { return offsets.empty() ? 0 : offsets.back(); }
};
size_t target_sort_work_bytes(int64_t n);  // the targets' sort temporaries in the work buffer
std::vector<MemoryItem> kept_tiles_scratch(const Problem& problem, const DropPlan& plan);
KeptTiles decide_kept_tiles(const Problem& problem, const DropPlan& plan, const Scratch& scratch, const float* lse,
                            const DropSettings& settings, cudaStream_t stream);
// Blocks of the recomputation resident on this GPU at once (SMs × blocks per SM).
int64_t recompute_resident_blocks(const Problem& p);
// runs: (token block, first tile, end tile, 0) per thread block, consecutive kept tiles of one token block.
void recompute_kept_tiles(const DeviceInputs& in, const DropPlan& plan, const Scratch& scratch, const float* lse,
                          const std::vector<int>& runs, int64_t first_slot, const SlotSpace& space,
                          cudaStream_t stream);

// Where stage 08's tail correction puts dC's tail sums G (null sums when
// !correct_dc): the statistics rows' free half, or an item of their own.
TailSums tail_sums_for(const Problem& problem, const DropPlan& plan, const Scratch& scratch, bool correct_dc);
std::vector<MemoryItem> tail_sums_scratch(const Problem& problem, const DropPlan& plan);

// kept_products.cu: the products of one chunk of kept tiles, and the targets' exact terms.
// dE's work is cut into parts of at least kLeastDePart kept tiles: at most
// de_part_capacity parts, their turns per (token block, column tile of 64).
constexpr int64_t kLeastDePart = 16;
inline int64_t de_part_capacity(const DropPlan& plan) {
  return plan.token_blocks + plan.tiles * plan.token_blocks / kLeastDePart;
}
inline int64_t de_column_tiles(const Problem& p) { return (p.d + 63) / 64; }
void kept_products(const DeviceInputs& in, const DropPlan& plan, const Scratch& scratch, const KeptTiles& kept,
                   const TailSums& tail, const SlotSpace& space, int64_t first_slot, int64_t tile_begin, int64_t tile_end,
                   float* de_acc, void* dc, cudaStream_t stream, SideStream& side);
void finish_de(const DeviceInputs& in, const Scratch& scratch, const float* de_acc, void* de, cudaStream_t stream);
// finish_de's target terms only, added to the fp32 accumulator in place (for
// a caller that sums several accumulators before rounding them).
void add_target_terms(const DeviceInputs& in, const Scratch& scratch, float* de_acc, cudaStream_t stream);

// The whole backward up to the fp32 dE accumulator (everything of
// PlanPerBatchStage::backward but finish_de): decide, correct the tail,
// recompute and multiply the kept tiles chunk by chunk; dC is written
// completely. Returns the accumulator (the start of the work buffer for bf16,
// `de` itself for fp32). `lse` is the full LSE of every row.
float* backward_to_accumulator(const DeviceInputs& in, const DropPlan& plan, const Scratch& scratch, const float* lse,
                               const float* upstream, const DropSettings& settings, void* de, void* dc,
                               cudaStream_t stream, SideStream& side, DropStats* stats);
// All of the backward's scratch (forward's, decision's, correction's items).
std::vector<MemoryItem> backward_scratch(const Problem& problem, const DropPlan& plan);

}  // namespace cce::s10
