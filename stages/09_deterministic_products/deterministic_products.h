// Stage 09: stage 08's backward, deterministic and without the [V, D]
// accumulator: each kept tile's S is recomputed once into a compact slot,
// then every output tile of dC and dE is summed by one owner, in a fixed
// order, without atomics: two runs give the same bits.
// Uses: stage 08's sorted forward, decision and tail correction; stage 06's
// row inputs (backward_tile.cuh); common/tile (block-level tile products
// whose rows and columns follow an order); cub (a radix sort of the targets).
//
// Backward (kept_tiles.cu, kept_products.cu):
//   1. stage 08's decision and tail correction;
//   2. slots: the kept pairs numbered tile by tile, token blocks ascending;
//      each token block's list of kept tiles; the tokens whose target falls
//      in a dropped tile, sorted by the target's position;
//   3. per chunk of consecutive tiles whose kept S tiles fit the slots:
//      recompute each kept tile's S = g·(p − onehot)·softcap' into its slot
//      (runs of consecutive tiles per block), then dC rows (one owner per
//      output tile, over its kept token blocks, with the tail's share and the
//      dropped targets' terms) and dE += S·C (one owner per output tile);
//   4. dE = the fp32 accumulator + the dropped targets' terms, rounded.
// README.md derives each step and gives the measurements.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/last_answer.h"
#include "common/pinned_staging.h"
#include "common/stage.h"
#include "common/tile/tile_path.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"

namespace cce::s09 {

using s08::TailSums;
using s08::TokenBlocks;

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

// The host's side of the backward's tables, in page-locked memory
// (common/pinned_staging.h says why): what it reads back (the per-tile counts
// and per-block lists of kept tiles) and what it sends (slot offsets, the
// recomputation's runs, dE's parts). The decision waits for the GPU once, on
// an event after its read-backs: the work queued after them (the tail
// correction) runs on while the host builds the tables.
struct HostTables {
  PinnedStaging read_back;  // reset where the decision starts: every read-back before it was waited for
  PinnedStaging sent;       // reset after the decision's wait: the stream has passed every copy sent before
  cudaEvent_t read_backs_done = nullptr;  // created on first use
  void mark_read_backs(cudaStream_t stream);  // after the last read-back is queued
  void wait_for_read_backs();                 // the decision's wait
  HostTables() = default;
  HostTables(const HostTables&) = delete;
  HostTables& operator=(const HostTables&) = delete;
  ~HostTables();
};

// What the backward decides with: eps (0: every pair with a gradient kept),
// the token blocks (null: the rows in their order), the corrections, and
// E's rows copied into the blocks' token order (bf16, null: none), which
// dC's owners then read by TMA as they read E's own rows in their order.
struct BackwardChoice {
  float eps = 0.0f;
  TokenBlocks blocks;
  bool correct_tail = true, correct_dc = true;
  const void* e_in_token_order = nullptr;
};

struct DropStats {
  int64_t tiles = 0, kept_tiles = 0;  // (token block, vocabulary tile) pairs
  int64_t chunks = 0;
  float eps = 0.0f;                   // the eps the last backward decided with
};

// The report's plan line: tiles, token blocks, the forward's chunk of sorted C
// (forward_chunk_rows), the backward's chunks and buffers.
std::string describe_drop_plan(const DropPlan& plan, int64_t forward_chunk_rows);

class DeterministicProductsStage : public Stage {
 public:
  std::string name() const override { return "09_deterministic_products"; }
  std::string summary() const override {
    return "stage 08's backward with deterministic owner products: recomputed S in slots, no atomics";
  }
  bool has_backward() const override { return true; }
  void expect_backward(bool yes) override { backward_follows_ = yes; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  bool skips_null_dc() const override { return true; }  // no dC products, no dC tail (stage 10's dense plan: no dC GEMM)
  void add_options(OptionParser& parser) override;
  void validate_options() const override;
  std::vector<std::string> report_lines() const override;
  // The last backward's dropped tiles hold entries below its eps, and their
  // mass is added back over each tile unless --no-correction.
  GradientApproximation gradient_approximation() const override {
    return {stats_.tiles > 0 ? stats_.eps : drop_eps(last_problem_.dtype), !no_correction_};
  }
  // Loss + gradient: every sum in a fixed order.
  bool bitwise_reproducible(bool backward) const override { return backward; }

  DropStats stats() const { return stats_; }
  std::vector<int> vocabulary_order() const;  // of the last forward with a backward (for the tests)
  std::vector<uint8_t> kept_flags() const;    // of the last backward, [tiles][token blocks] (for the tests)
  // The eps of --drop-eps (or the default 2^-8, 2^-28); 0 with --keep-all.
  float drop_eps(Dtype dtype) const;
  // The plan the flags give for p (--chunk-rows, --slot-mb). A call asks for
  // it many times and each answer costs microseconds of host time (the
  // forward's range balancing), some before the first kernel: the last is kept.
  DropPlan plan_for(const Problem& p) const {
    return planned_.get(PlanKey{p, chunk_rows_flag_, slot_mb_flag_},
                        [&] { return plan_drop(p, chunk_rows_flag_, static_cast<size_t>(slot_mb_flag_) << 20); });
  }

 protected:
  // The flags, with what --drop-eps 0 means.
  void add_drop_options(OptionParser& parser, const char* eps_help);
  // The backward's steps after the grad scale, at a choice (stage 09: the
  // flags' eps, rows in their order).
  void backward_at(const DeviceInputs& in, const float* lse, const BackwardChoice& choice, void* de, void* dc,
                   cudaStream_t stream);
  BackwardChoice flags_choice(Dtype dtype) const { return {drop_eps(dtype), TokenBlocks{}, !no_correction_, !no_dc_correction_}; }

  double eps_flag_ = 0.0;        // --drop-eps; 0 = s08::default_drop_eps
  int64_t chunk_rows_flag_ = 0;  // --chunk-rows
  int64_t slot_mb_flag_ = 0;     // --slot-mb
  bool keep_all_ = false, no_correction_ = false, no_dc_correction_ = false;
  bool backward_follows_ = false;
  bool stats_ready_ = false;
  Problem last_problem_;
  DropStats stats_;
  SideStream side_;
  HostTables host_;  // page-locked tables of the decision (kept_tiles.cu)

 private:
  struct PlanKey {
    Problem problem;
    int64_t chunk_rows = 0, slot_mb = 0;
    bool operator==(const PlanKey& o) const {
      return problem == o.problem && chunk_rows == o.chunk_rows && slot_mb == o.slot_mb;
    }
  };
  mutable LastAnswer<PlanKey, DropPlan> planned_;  // plan_for's last question and answer
};

std::unique_ptr<Stage> make_stage();

// ---- the stage's steps (used by the stage class above and by later stages) ----

// The forward is stage 08's, on this plan's work buffer.
s08::SortedForwardPlan forward_plan(const DropPlan& plan);

// The backward's buffers, beside the forward's: the one place that names
// the scratch items of backward_scratch (the memory model).
struct BackwardBuffers {
  s08::SortedForwardBuffers forward;  // the statistics, the orders, the work buffer (free after the forward)
  float* grad_scale = nullptr;        // [N]: g_i
  float* target_coefficient = nullptr;  // [N]: the dropped targets' a_i (stage 08)
  int* sorted_targets = nullptr;  // [N] positions, [N] tokens: those with a term sorted by position; [tiles+1] tile offsets
  int* de_parts = nullptr;        // dE's parts [4 each], turns [token blocks][D/64], a ticket
  uint8_t* keep = nullptr;        // [tiles][token blocks]
  int* kept_counts = nullptr;     // [tiles] counts, [tiles+1] slot offsets, [tiles] the tiles with slots
  int* block_lists = nullptr;     // [token blocks][1 + tiles]
  int* slots = nullptr;           // [3][pairs]: token block, tile of each slot; slot of each pair
  int* recompute_runs = nullptr;  // [chunk slots][4]
  TailSums tail;                  // where G goes (the statistics rows' free half, or an item of its own)
};
// Their memory model (with tail_sums_scratch and the forward's items: backward_scratch).
std::vector<MemoryItem> kept_tiles_scratch(const Problem& problem, const DropPlan& plan);
BackwardBuffers backward_buffers(const Problem& problem, const DropPlan& plan, const Scratch& scratch);
// The per-token grad scale g_i from the upstream gradient.
void compute_grad_scale(const DeviceInputs& in, const float* upstream, const BackwardBuffers& buffers,
                        cudaStream_t stream);

// kept_tiles.cu: the decision's slots and lists, the tail correction, the
// recomputed S of kept tiles. In HostTables' memory: valid until the next decision.
struct KeptTiles {
  HostSpan<int> offsets;  // [tiles + 1]: tile T's kept token blocks are slots offsets[T]..offsets[T+1]
  HostSpan<int> tiles_with_slots;  // ascending: the tiles with at least one kept token block (also on the device)
  HostSpan<int> block_lists;       // [token blocks][1 + tiles]: count, then the kept tiles ascending (also on the device)
  TailSums tail;                   // dC's tail sums G, where the correction wrote them (null: none)
  int64_t kept() const { return offsets.empty() ? 0 : offsets.back(); }
};
size_t target_sort_work_bytes(int64_t n);  // the targets' sort temporaries in the work buffer
// Stage 08's decision at choice.eps, then kept_tiles_from_flags (its tail
// correction only where eps can drop a pair with a gradient: eps > 0).
KeptTiles decide_kept_tiles(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                            const float* lse, const BackwardChoice& choice, float* de_acc, void* dc, HostTables& host,
                            cudaStream_t stream);
// Its second half, for a caller that decided otherwise: the flags buffers.keep
// and the per-tile counts buffers.kept_counts are on the stream already, and
// host.read_back was reset where that decision started. Everything that needs
// the flags alone is queued before the one wait: the dropped targets, the
// lists, the slots, into de_acc (overwritten) stage 08's tail correction when
// choice.correct_tail, else zeros, and dC's rows of the tiles without a kept
// pair (de_acc null: neither of the last two, for a decision that
// recomputes nothing). The host reads the counts and lists back in the wait
// and makes the same offsets as the device for its chunks and runs.
KeptTiles kept_tiles_from_flags(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                                const float* lse, const BackwardChoice& choice, float* de_acc, void* dc,
                                HostTables& host, cudaStream_t stream);
// Blocks of the recomputation resident on this GPU at once (SMs × blocks per SM).
int64_t recompute_resident_blocks(const Problem& p);
// runs: (token block, first tile, end tile, 0) per thread block, consecutive kept tiles of one token block, in
// page-locked memory that stays until host.sent's next reset.
void recompute_kept_tiles(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                          const float* lse, const TokenBlocks& blocks, const HostSpan<int>& runs, int64_t first_slot,
                          const SlotSpace& space, cudaStream_t stream);

// dC's tail sums G: in the statistics rows' free half when the plan says so
// (no item), else an item of their own.
std::vector<MemoryItem> tail_sums_scratch(const Problem& problem, const DropPlan& plan);

// kept_products.cu: the products of one chunk of kept tiles, and the targets' exact terms.
// dE's work is cut into parts of at least kLeastDePart kept tiles: at most
// de_part_capacity parts, their turns per (token block, column tile of 64).
constexpr int64_t kLeastDePart = 16;
inline int64_t de_part_capacity(const DropPlan& plan) {
  return plan.token_blocks + plan.tiles * plan.token_blocks / kLeastDePart;
}
inline int64_t de_column_tiles(const Problem& p) { return (p.d + 63) / 64; }
void kept_products(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers, const KeptTiles& kept,
                   const TokenBlocks& blocks, const void* e_in_token_order, const TailSums& tail, const SlotSpace& space,
                   int64_t first_slot, int64_t tile_begin, int64_t tile_end,
                   float* de_acc, void* dc, cudaStream_t stream, SideStream& side, HostTables& host);
// Whether dC's owners read a k-step's rows of E by TMA where they are
// consecutive (bf16 products on wgmma): E's own rows in their order, or
// BackwardChoice::e_in_token_order.
bool dc_rows_by_tma(const Problem& problem);
// dC's rows of the tiles without a kept pair (every tile's: those with one are left to kept_products): the tail's
// share and the dropped targets' terms. Needs the flags' slot offsets on the device, the dropped targets sorted, and
// the tail sums (null: no share).
void unkept_dc_rows(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers, const TailSums& tail,
                    void* dc, cudaStream_t stream);
void finish_de(const DeviceInputs& in, const BackwardBuffers& buffers, const float* de_acc, void* de, cudaStream_t stream);
// finish_de's target terms only, added to the fp32 accumulator in place (for
// a caller that sums several accumulators before rounding them).
void add_target_terms(const DeviceInputs& in, const BackwardBuffers& buffers, float* de_acc, cudaStream_t stream);

// The whole backward up to the fp32 dE accumulator, once compute_grad_scale
// has run and decide_kept_tiles has decided and corrected the tail into
// de_accumulator (everything of the stage's backward but finish_de):
// recompute and multiply the kept tiles chunk by chunk; dC is written completely. Returns the accumulator
// (the start of the work buffer for bf16, `de` itself for fp32). `lse` is
// the full LSE of every row. The chunks start at tile first_tile: the tiles
// before it are left to the caller (their products and dC's rows; keep all
// of their pairs, so that no tail and no dropped target falls there).
float* backward_to_accumulator(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                               const float* lse, const BackwardChoice& choice, const KeptTiles& kept, void* de,
                               void* dc, cudaStream_t stream, SideStream& side, HostTables& host, DropStats* stats,
                               int64_t first_tile = 0);
// Where the fp32 dE accumulator lives: the start of the work buffer (bf16), `de` itself (fp32).
float* de_accumulator(const Problem& problem, const BackwardBuffers& buffers, void* de);
// All of the backward's scratch (forward's, decision's, correction's items).
std::vector<MemoryItem> backward_scratch(const Problem& problem, const DropPlan& plan);

}  // namespace cce::s09
