// Stage 09's products over the kept tiles of one chunk, each output tile
// summed in a fixed order: no atomics on the outputs, so two runs give the
// same bits.
//   dC: a block per (sorted vocabulary tile T with a kept token block, 128
//       columns of D): the sum over T's kept token blocks b (ascending) of
//       S_bTᵀ · E_b, plus the dropped tail's share G_T/|T| and the exact terms
//       a_i E_i of the targets that fell in dropped tiles (tokens in order),
//       written to the dC rows of T's vocabulary entries. Tiles without a
//       kept token block get the last two only (dc_unkept_rows, queued by the
//       decision before its wait: they need the flags alone).
//   dE: a block per (part of token block b's kept tiles, 128 columns of D):
//       dE_acc += the sum over the part's tiles T (ascending) of S_bT · C_T.
//       A short list is one part; a long one (grouped tokens) several, which
//       add in part order by turns. Chunks run in order, so every element of
//       dE_acc sees the same sequence of adds.
// bf16: 128×128 output tiles, the k-loop over kept tiles in steps of 64
// with cp.async stages, two blocks per SM, each step's indices found a step
// ahead; the products on wgmma on Hopper (the tile engine's block-level path,
// D % 8 == 0), on mma.sync elsewhere. On wgmma, dC's rows of E come by TMA
// when a step's 64 rows are consecutive (E's own rows in their order, or a
// copy of E in the token order): two boxes, where cp.async takes 1024
// copies. The dE blocks run on a side stream of the highest priority beside
// dC's.
// fp32 (the tests' other dtype): FFMA on 64×64.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/tile/mma_sync.cuh"
#include "common/tile/tile_path.h"
#include "common/tile/tensor_map.h"
#include "common/tile/tile_wgmma.cuh"
#include "common/tile/wgmma.cuh"
#include "common/tile/wgmma_pipeline.cuh"  // sm90:: mbarriers and tma_load
#include "stages/09_deterministic_products/deterministic_products.h"
#include "stages/09_deterministic_products/slot_space.cuh"

namespace cce::s09 {
namespace {

// The dropped targets of dC row `pos` (a sorted position) of a tile: the
// tile's are entries [range.x, range.y) of the list sorted by target position
// (tile_target_offsets), so the row's are a contiguous part of them.
__device__ __forceinline__ int2 row_targets(int2 range, int64_t pos, const int* __restrict__ sorted_position) {
  const int lo = lower_bound_index(sorted_position, range.x, range.y, pos);
  int end = lo;
  while (end < range.y && sorted_position[end] == pos) ++end;
  return make_int2(lo, end);
}

// Their terms Σ a_i E_i in column col, in list order (tokens ascending).
template <typename T>
__device__ __forceinline__ float target_terms(int2 row, const int* __restrict__ sorted_token,
                                              const float* __restrict__ coefficient, const T* __restrict__ e, int64_t d,
                                              int64_t col) {
  float sum = 0.0f;
  for (int k = row.x; k < row.y; ++k) {
    const int64_t token = sorted_token[k];
    sum += coefficient[token] * to_float(e[token * d + col]);
  }
  return sum;
}

struct ProductArgs {
  SlotSpace space;  // the chunk's S tiles, by slot − first_slot [rows][cols]
  int64_t first_slot;
  const int* offsets;     // [tiles + 1]
  const int* slot_block;  // [slots]
  const int* slot_of;     // [token blocks][tiles]
  const int* tiles_with_slots;  // the dC blocks' tiles: tiles_with_slots[kept_tile_begin + blockIdx.y]
  int64_t kept_tile_begin;
  const int* block_lists;  // [token blocks][1 + tiles]: count, then the kept tiles ascending
  const int* order;       // [V]
  const int* token_order;  // [N]: token block b's rows are token_order[b·tile .. (b+1)·tile); null: rows b·tile ..
  int64_t n, d, v, tiles, tile_begin, tile_end;
  // the targets' exact terms
  const int* sorted_position;
  const int* sorted_token;
  const float* coefficient;
  const int* tile_target_offsets;  // [tiles + 1]: tile T's dropped targets are sorted entries [off[T], off[T+1])
  // dE's work: parts (token block, part index, entries [first, end) of the
  // block's list) of this chunk, part-major; the parts of one output tile
  // add in part order, each after the one before (turns), and a block takes
  // its (part, column tile) by ticket, in the order blocks start.
  const int4* de_parts;
  int64_t de_part_count;
  int* de_turns;   // [token blocks][column tiles]: the next part to add
  int* de_ticket;
  // the dropped tail of dC: every row of tile T gets tail_sums[T·tail_ld + k] / (rows of T)
  const float* tail_sums;  // null: no correction
  int64_t tail_ld, tile_cols;
};

// The row at a place of the token order.
__device__ __forceinline__ int64_t row_at(const ProductArgs& args, int64_t place) {
  return args.token_order != nullptr ? args.token_order[place] : place;
}

__device__ __forceinline__ int2 tile_targets(const ProductArgs& args, int64_t tile) {
  return make_int2(args.tile_target_offsets[tile], args.tile_target_offsets[tile + 1]);
}

// The dropped tail's share of one dC element of tile `tile`.
__device__ __forceinline__ float tail_share(const ProductArgs& args, int64_t tile, int64_t col) {
  if (args.tail_sums == nullptr) return 0.0f;
  const int64_t rows = args.v - tile * args.tile_cols < args.tile_cols ? args.v - tile * args.tile_cols : args.tile_cols;
  return args.tail_sums[tile * args.tail_ld + col] / static_cast<float>(rows);
}

// ------------------------------------------------------------------ bf16
// A kept tile is two k-steps of 64: each stage holds half of an S tile and
// the 64 rows of the other operand that it multiplies, 35 KB, so that three
// stages leave room for two blocks on an SM (one block of 3 × 68 KB stages,
// whole tiles, left the tensor cores waiting on each block's loads).
constexpr int kTile = 128, kStep = 64;  // output tile; k per stage
constexpr int kWidePitch = kTile + 8, kNarrowPitch = kStep + 8;  // 272- and 144-byte rows: conflict-free ldmatrix
// A: S's half [128 tokens][64 vocab] (dE) or [64 tokens][128 vocab] (dC); B: [64 k][128 columns of D].
constexpr size_t kOperandBytes = static_cast<size_t>(kTile) * kNarrowPitch * 2;  // ≥ kStep · kWidePitch · 2
constexpr size_t kStageBytes = kOperandBytes + static_cast<size_t>(kStep) * kWidePitch * 2;
constexpr int kStages = 3;  // k-steps in flight
constexpr size_t kProductShared = kStages * kStageBytes;
// 8 warps as 4 × 2 pieces of 32×64 of the 128×128 output: the tile products'
// fragment picture (mma_sync.cuh), so z, row_of and col_of say where each sum lands.
using ProductAccumulators = MmaSyncWarpGrid<32, 64, 4, 2>;
static_assert(static_cast<size_t>(kStep) * kWidePitch <= static_cast<size_t>(kTile) * kNarrowPitch, "A's two shapes");

// Per k-step a thread copies kRowsPerThread rows' 16-byte chunks of the
// other operand: rows step_row(j) of the step's kStep.
constexpr int kRowsPerThread = kStep * (kTile / 8) / 256;  // blockDim.x == 256
__device__ __forceinline__ int step_row(int j) { return (threadIdx.x + j * 256) / (kTile / 8); }

// What one k-step reads: its S tile and half, and the rows of the other
// operand (−1: a zero row). Found a step ahead of its copies (run_items), so
// that the index loads behind it wait behind a step of products, not before one.
struct StepSource {
  const __nv_bfloat16* s;
  int step;
  int rows[kRowsPerThread];
  int64_t row0 = 0;  // the step's first row, where its rows are consecutive (the wgmma path's TMA copies)
};

// The step's rows of `src` ([rows, d] bf16) × columns [d0, d0 + 128) into dst (pitch kWidePitch).
template <bool kAligned>
__device__ __forceinline__ void load_rows(const __nv_bfloat16* __restrict__ src, int64_t d, int64_t d0,
                                          const StepSource& source, __nv_bfloat16* dst) {
  constexpr int kParts = kTile / 8;
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) {
    const int r = step_row(j), part = threadIdx.x % kParts;
    const int64_t row = source.rows[j], k = d0 + part * 8;
    __nv_bfloat16* out = dst + r * kWidePitch + part * 8;
    if constexpr (kAligned) {
      const bool valid = row >= 0 && k < d;
      cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(out)), valid ? src + row * d + k : src, valid);
    } else {
#pragma unroll
      for (int x = 0; x < 8; ++x) out[x] = row >= 0 && k + x < d ? src[row * d + k + x] : __float2bfloat16(0.0f);
    }
  }
}
// Half `step` of an S tile (in its slot as s_index says): for dE its
// vocabulary columns 64·step.., pitch kNarrowPitch; for dC (transposed) its
// token rows 64·step.., pitch kWidePitch.
template <bool kTransposeS>
__device__ __forceinline__ void load_s_half(const __nv_bfloat16* __restrict__ s, int step, __nv_bfloat16* dst) {
  constexpr int kRows = kTransposeS ? kStep : kTile, kCols = kTransposeS ? kTile : kStep;
  constexpr int kPitch = kTransposeS ? kWidePitch : kNarrowPitch;
#pragma unroll
  for (int j = 0; j < kRows * (kCols / 8) / 256; ++j) {
    const int i = threadIdx.x + j * 256, r = i / (kCols / 8), part = i % (kCols / 8);
    const int row = kTransposeS ? step * kStep + r : r, col = kTransposeS ? part * 8 : step * kStep + part * 8;
    cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(dst + r * kPitch + part * 8)),
                s + s_index<__nv_bfloat16, kTile>(row, col), true);
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// acc (a warp's 32×64 piece of the 128×128 output) += A · B over one k-step
// of 64: A = S (dE) or Sᵀ (dC) from a_tile, B [k][n] from b_tile.
template <bool kTransposeS>
__device__ __forceinline__ void mma_step(ProductAccumulators& acc, const __nv_bfloat16* a_tile,
                                         const __nv_bfloat16* b_tile) {
  using Acc = ProductAccumulators;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k0 = 0; k0 < kStep; k0 += 16) {
    uint32_t a[Acc::kMTiles][4], b[Acc::kNTiles][2];
#pragma unroll
    for (int mt = 0; mt < Acc::kMTiles; ++mt) {
      const int m0 = Acc::warp_m() * Acc::kWarpRows + mt * 16;
      if constexpr (kTransposeS) {  // S stored [k = token][m = vocab]
        const int mi = lane / 8;
        ldmatrix_x4(a[mt], a_tile + (k0 + lane % 8 + (mi / 2) * 8) * kWidePitch + m0 + (mi % 2) * 8, true);
      } else {  // S stored [m = token][k = vocab]
        ldmatrix_x4(a[mt], a_tile + (m0 + lane % 16) * kNarrowPitch + k0 + (lane / 16) * 8, false);
      }
    }
#pragma unroll
    for (int np = 0; np < Acc::kNTiles / 2; ++np) {
      const int n0 = Acc::warp_n() * Acc::kWarpCols + np * 16;
      const int k = k0 + lane % 8 + ((lane / 8) % 2) * 8, nn = n0 + (lane / 16) * 8;
      uint32_t r[4];
      ldmatrix_x4(r, b_tile + k * kWidePitch + nn, true);
      b[2 * np][0] = r[0], b[2 * np][1] = r[1], b[2 * np + 1][0] = r[2], b[2 * np + 1][1] = r[3];
    }
#pragma unroll
    for (int mt = 0; mt < Acc::kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < Acc::kNTiles; ++nt) mma_bf16(acc.acc[mt][nt], a[mt], b[nt]);
  }
}

// The k-loop over a list of items (kept slots), two k-steps per item,
// kStages − 1 steps loaded ahead of the products. next(cursor) → the next
// item's index ≥ cursor, or −1; source(item, step, with_s) → the step's StepSource (S's address only with_s),
// found one step before its copies are issued; other: E (dC) or C (dE).
template <bool kTransposeS, bool kAligned, class Next, class Source>
__device__ __forceinline__ void run_items(ProductAccumulators& acc, unsigned char* shared, Next&& next, Source&& source,
                                          int first, const __nv_bfloat16* __restrict__ other, int64_t d, int64_t d0) {
  auto a_of = [&](int stage) { return reinterpret_cast<__nv_bfloat16*>(shared + stage * kStageBytes); };
  auto b_of = [&](int stage) { return reinterpret_cast<__nv_bfloat16*>(shared + stage * kStageBytes + kOperandBytes); };
  unsigned loaded = 0;  // bit s: stage s holds a step (a mask, not an array: registers, not local memory)
  int fetch = first, fetch_step = 0;
  StepSource ahead{};
  if (fetch >= 0) ahead = source(fetch, 0, true);
  auto issue = [&](int stage) {
    loaded = fetch >= 0 ? loaded | (1u << stage) : loaded & ~(1u << stage);
    if (fetch >= 0) {
      load_s_half<kTransposeS>(ahead.s, ahead.step, a_of(stage));
      load_rows<kAligned>(other, d, d0, ahead, b_of(stage));
      if (++fetch_step == kTile / kStep) fetch_step = 0, fetch = next(fetch + 1);
      if (fetch >= 0) ahead = source(fetch, fetch_step, true);
    }
    cp_async_commit();  // an empty group when nothing is left
  };
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) issue(stage);
  for (int stage = 0, load_stage = kStages - 1;; stage = (stage + 1) % kStages, load_stage = (load_stage + 1) % kStages) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // this stage's data is in, and every warp is done with load_stage's previous step
    if ((loaded & (1u << stage)) == 0) break;
    issue(load_stage);
    mma_step<kTransposeS>(acc, a_of(stage), b_of(stage));
  }
}

// ------------------------------------------------------------ bf16, Hopper
// The same k-loop on wgmma (sm_90a, D % 8 == 0): each warpgroup multiplies
// its 64 rows of the 128×128 output by the step's operands straight from
// shared memory, 4 wgmma m64n128k16 per step, the accumulators laid out as
// the block-level tile product's (TileProductWgmma). The operands land in the
// 128-byte swizzle (wgmma.cuh): S by bulk copies (the slots hold it so), the
// rows by TMA where consecutive, else gathered by cp.async:
//   A, dE: the S half [128 tokens][64 vocab], K-major, a warpgroup's 64 rows 8 KB apart;
//   A, dC: the S rows [64 tokens][128 vocab] read as Sᵀ, MN-major, two 64-vocabulary pieces 8 KB apart;
//   B:     the step's 64 rows of C or E × 128 columns of D, MN-major, two 64-column pieces 8 KB apart.
// kWgmmaAhead steps are loaded ahead and one step's wgmmas stay in flight
// while the next step's copies are issued, so a stage is refilled two steps
// after its wgmmas were issued (kWgmmaAhead ≤ kWgmmaStages − 2); the second
// block on the SM hides what the one step ahead does not.
constexpr int kWgmmaStages = 3, kWgmmaAhead = 1;  // 97 KB: two blocks per SM (one with 4 stages: 1.2x slower)
constexpr uint32_t kWgmmaPiece = kStep * 128;  // [64 k rows][128 bytes]: 8 KB
constexpr uint32_t kWgmmaOperandBytes = 2 * kWgmmaPiece;
constexpr uint32_t kWgmmaStageBytes = 2 * kWgmmaOperandBytes;
// +1024: the swizzle's alignment; +64: a "full" mbarrier per stage for rows brought by TMA.
constexpr size_t kWgmmaShared = kWgmmaStages * kWgmmaStageBytes + 1024 + 64;
constexpr int kWgmmaBlocksPerSm = kWgmmaShared <= 113 * 1024 ? 2 : 1;
static_assert(kWgmmaAhead <= kWgmmaStages - 2, "a stage is refilled only after its wgmmas are done");

// Byte offset of 16-byte chunk `chunk` (0..15, 8 bf16 each) of k-row `k` in an MN-major operand.
[[maybe_unused]] __device__ __forceinline__ uint32_t mn_major_offset(int k, int chunk) {
  return (chunk / 8) * kWgmmaPiece + k * 128 + (((chunk % 8) ^ (k % 8)) * 16);
}

// The step's S operand, by one thread: the slot holds S as wgmma reads it
// (s_index), so it is one bulk copy (dE: the vocabulary half `step`, 16 KB)
// or two (dC: token rows 64·step.. of each half, 8 KB each, to the two
// 64-vocabulary pieces of Sᵀ), their bytes counted on the stage's full
// mbarrier (its expected bytes are set by the caller).
template <bool kTransposeS>
__device__ __forceinline__ void copy_s_operand(const __nv_bfloat16* __restrict__ s, int step, uint32_t dst,
                                               uint32_t full) {
  auto bulk = [&](uint32_t to, const __nv_bfloat16* from, uint32_t bytes) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(to),
                 "l"(from), "r"(bytes), "r"(full)
                 : "memory");
  };
  if constexpr (kTransposeS) {
    for (int half = 0; half < 2; ++half)
      bulk(dst + half * kWgmmaPiece, s + s_index<__nv_bfloat16, kTile>(step * kStep, half * 64), kWgmmaPiece);
  } else {
    bulk(dst, s + s_index<__nv_bfloat16, kTile>(0, step * kStep), kWgmmaOperandBytes);
  }
}

// The step's rows of `src` ([rows, d] bf16) × columns [d0, d0 + 128), MN-major. A thread's rows lie 16 apart:
// one swizzle (k % 8) for all, destinations 2 KB apart. Sources in 32-bit counts of 16-byte chunks (the block
// path keeps rows · d / 8 below 2^32: tile_path.cpp).
[[maybe_unused]] __device__ __forceinline__ void load_rows_swizzled(const __nv_bfloat16* __restrict__ src, int64_t d, int64_t d0,
                                                   const StepSource& source, uint32_t dst) {
  const int chunk = threadIdx.x % (kTile / 8);
  const uint32_t first = dst + mn_major_offset(step_row(0), chunk);
  const uint32_t column = static_cast<uint32_t>(d0 / 8 + chunk), row_chunks = static_cast<uint32_t>(d / 8);
  const bool column_in_d = static_cast<int64_t>(column) * 8 < d;  // d % 8 == 0: a chunk is all in or all out
  const int4* from = reinterpret_cast<const int4*>(src);
  static_assert(256 / (kTile / 8) * 128 == 2048, "a thread's rows lie 16 apart, 2 KB in the stage");
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) {
    const int row = source.rows[j];
    const bool valid = row >= 0 && column_in_d;
    cp_async_16(first + j * 2048, valid ? from + (static_cast<uint32_t>(row) * row_chunks + column) : from, valid);
  }
}

// acc += A · B over one k-step of 64 in the stage at `stage` (A, then B).
template <bool kTransposeS>
__device__ __forceinline__ void wgmma_step(TileProductWgmma& acc, uint32_t stage) {
  const uint32_t warpgroup = threadIdx.x / 128;
  const uint64_t desc_b = wgmma_descriptor_mn(stage + kWgmmaOperandBytes, kWgmmaPiece);
  wgmma_arrive();
  if constexpr (kTransposeS) {
    const uint64_t desc_a = wgmma_descriptor_mn(stage + warpgroup * kWgmmaPiece, kWgmmaPiece);
#pragma unroll
    for (int ks = 0; ks < kStep / 16; ++ks) wgmma_m64n128k16<1, 1>(acc.d, desc_a + 128 * ks, desc_b + 128 * ks, 1);
  } else {
    const uint64_t desc_a = wgmma_descriptor(stage + warpgroup * kWgmmaPiece);
#pragma unroll
    for (int ks = 0; ks < kStep / 16; ++ks) wgmma_m64n128k16<0, 1>(acc.d, desc_a + 2 * ks, desc_b + 128 * ks, 1);
  }
  wgmma_commit();
}

// run_items on wgmma: the same items, sources and order of adds per element.
// kRowsByTma: a step's rows are consecutive (source.row0 ..), and one thread
// brings them as two 64 × 64 boxes of rows_map (zeros past its rows and
// columns), counted on the stage's full mbarrier; else cp.async gathers them.
template <bool kTransposeS, bool kRowsByTma, class Next, class Source>
__device__ __forceinline__ void run_items_wgmma(TileProductWgmma& acc, unsigned char* shared, Next&& next,
                                                Source&& source, int first, const __nv_bfloat16* __restrict__ other,
                                                int64_t d, int64_t d0, const CUtensorMap* rows_map) {
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const uint32_t base = (raw + 1023u) & ~1023u;
  auto stage_at = [&](int stage) { return base + stage * kWgmmaStageBytes; };
  const uint32_t full = base + kWgmmaStages * kWgmmaStageBytes;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWgmmaStages; ++s) sm90::barrier_init(full + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  unsigned loaded = 0, parity = 0;  // parity bit s: of stage s's next completion
  int fetch = first, fetch_step = 0;
  StepSource ahead{};
  const bool copies_s = threadIdx.x == 0;  // S's bulk copies come from one thread: only it finds the slot
  if (fetch >= 0) ahead = source(fetch, 0, copies_s);
  auto issue = [&](int stage) {
    loaded = fetch >= 0 ? loaded | (1u << stage) : loaded & ~(1u << stage);
    if (fetch >= 0) {
      if (threadIdx.x == 0) {  // S by bulk copies, and the rows by TMA where they are consecutive
        const uint32_t bar = full + 8 * stage;
        sm90::barrier_expect_bytes(bar, kRowsByTma ? 2 * kWgmmaOperandBytes : kWgmmaOperandBytes);
        copy_s_operand<kTransposeS>(ahead.s, ahead.step, stage_at(stage), bar);
        if constexpr (kRowsByTma) {
          const uint32_t dst = stage_at(stage) + kWgmmaOperandBytes;
          for (int piece = 0; piece < 2; ++piece)
            sm90::tma_load(dst + piece * kWgmmaPiece, rows_map, static_cast<int>(d0 + piece * 64),
                           static_cast<int>(ahead.row0), bar);
        }
      }
      if constexpr (!kRowsByTma) load_rows_swizzled(other, d, d0, ahead, stage_at(stage) + kWgmmaOperandBytes);
      if (++fetch_step == kTile / kStep) fetch_step = 0, fetch = next(fetch + 1);
      if (fetch >= 0) ahead = source(fetch, fetch_step, copies_s);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int stage = 0; stage < kWgmmaAhead; ++stage) issue(stage);
  for (int stage = 0, load_stage = kWgmmaAhead;; stage = (stage + 1) % kWgmmaStages,
           load_stage = (load_stage + 1) % kWgmmaStages) {
    cp_async_wait<kWgmmaAhead - 1>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::);  // cp.async wrote rows; wgmma reads through the async proxy
    // This stage's cp.async data is in, and every warpgroup's wgmmas of two steps ago
    // (load_stage's last reader) are done: each waited for them below.
    __syncthreads();
    if ((loaded & (1u << stage)) == 0) break;
    sm90::barrier_wait(full + 8 * stage, (parity >> stage) & 1u);  // its bulk copies and TMA boxes
    parity ^= 1u << stage;
    issue(load_stage);
    wgmma_step<kTransposeS>(acc, stage_at(stage));
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  wgmma_fence_operands(acc.d);
}

// The products' accumulators and k-loop on each path: mma.sync (any GPU from
// sm_80, any D) or wgmma (Hopper, D % 8 == 0).
template <bool kWgmma>
using Accumulators = std::conditional_t<kWgmma, TileProductWgmma, ProductAccumulators>;
template <bool kWgmma, bool kTransposeS, bool kAligned, bool kRowsByTma = false, class Next, class Source>
__device__ __forceinline__ void run_products(Accumulators<kWgmma>& acc, unsigned char* shared, Next&& next,
                                             Source&& source, int first, const __nv_bfloat16* __restrict__ other,
                                             int64_t d, int64_t d0, const CUtensorMap* rows_map = nullptr) {
  if constexpr (kWgmma) {
    static_assert(kAligned, "the wgmma path loads 16-byte chunks");
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    run_items_wgmma<kTransposeS, kRowsByTma>(acc, shared, next, source, first, other, d, d0, rows_map);
#else
    (void)rows_map;
    __trap();  // built without sm_90a: the host never launches this path
#endif
  } else {
    static_assert(!kRowsByTma, "rows by TMA on the wgmma path only");
    (void)rows_map;
    run_items<kTransposeS, kAligned>(acc, shared, next, source, first, other, d, d0);
  }
}
constexpr size_t product_shared_bytes(bool wgmma) { return wgmma ? kWgmmaShared : kProductShared; }
constexpr int product_blocks_per_sm(bool wgmma) { return wgmma ? kWgmmaBlocksPerSm : 2; }

// The epilogues first put the block's 128×128 sums into shared memory (the
// k-loop's stages are free by then) and then walk them a row per warp, so
// that each row of dC or dE_acc is read and written as contiguous 16-byte
// pieces; stored straight from the fragments, a warp's store would touch 8
// rows in 8-byte pieces.
constexpr int kSumsPitch = kTile + 8;  // floats: a half-warp's 8-byte stores of 4 rows hit 32 different banks
constexpr size_t kSumsBytes = static_cast<size_t>(kTile) * kSumsPitch * sizeof(float);
static_assert(kSumsBytes <= kProductShared && kSumsBytes <= kWgmmaShared, "the sums fit where the stages were");
constexpr int kColumnsPerLane = kTile / 32;  // 4: a warp covers a row's 128 columns

template <class Acc>
__device__ __forceinline__ const float* stage_sums(Acc& acc, unsigned char* shared) {
  __syncthreads();  // every warp is done reading the stages
  float* sums = reinterpret_cast<float*>(shared);
#pragma unroll
  for (int r = 0; r < Acc::kRows; ++r)
#pragma unroll
    for (int c = 0; c < Acc::kCols; c += 2)  // columns c, c + 1 are adjacent
      *reinterpret_cast<float2*>(sums + Acc::row_of(r) * kSumsPitch + Acc::col_of(c)) =
          make_float2(acc.z(r, c), acc.z(r, c + 1));
  __syncthreads();
  return sums;
}

// kRowsByTma (wgmma, rows in their order): E's rows by TMA through e_map.
template <bool kWgmma, bool kAligned, bool kRowsByTma>
__global__ void __launch_bounds__(256, product_blocks_per_sm(kWgmma))
    dc_products_bf16(ProductArgs args, const __nv_bfloat16* __restrict__ e, __nv_bfloat16* __restrict__ dc,
                     const __grid_constant__ CUtensorMap e_map) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int64_t tile = args.tiles_with_slots[args.kept_tile_begin + blockIdx.y];
  const int64_t d0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int begin = args.offsets[tile], end = args.offsets[tile + 1];
  using Acc = Accumulators<kWgmma>;
  Acc acc;
  acc.zero();
  run_products<kWgmma, true, kAligned, kRowsByTma>(
      acc, shared, [&](int slot) { return slot < end ? slot : -1; },
      [&](int slot, int step, bool with_s) {
        StepSource source{with_s ? slot_tile<const __nv_bfloat16>(args.space, slot - args.first_slot) : nullptr, step, {}};
        const int64_t row0 = static_cast<int64_t>(args.slot_block[slot]) * kTile + step * kStep;
        source.row0 = row0;
        if constexpr (!kRowsByTma) {
#pragma unroll
          for (int j = 0; j < kRowsPerThread; ++j)
            source.rows[j] = row0 + step_row(j) < args.n ? row_at(args, row0 + step_row(j)) : -1;
        }
        return source;
      },
      begin < end ? begin : -1, e, args.d, d0, &e_map);
  const float* sums = stage_sums(acc, shared);
  // A warp per row, a lane per 4 columns: the tail's shares of a lane's columns are the same on every row.
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t col0 = d0 + lane * kColumnsPerLane;
  float tail[kColumnsPerLane];
#pragma unroll
  for (int k = 0; k < kColumnsPerLane; ++k) tail[k] = col0 + k < args.d ? tail_share(args, tile, col0 + k) : 0.0f;
  const int2 tile_range = tile_targets(args, tile);
  for (int r = warp; r < kTile; r += 8) {
    const int64_t pos = tile * kTile + r;
    if (pos >= args.v) break;
    const int2 targets = row_targets(tile_range, pos, args.sorted_position);
    __nv_bfloat16* row = dc + static_cast<int64_t>(args.order[pos]) * args.d;
    float x[kColumnsPerLane];
#pragma unroll
    for (int k = 0; k < kColumnsPerLane; ++k)
      x[k] = col0 + k < args.d ? sums[r * kSumsPitch + lane * kColumnsPerLane + k] + tail[k] +
                                     target_terms(targets, args.sorted_token, args.coefficient, e, args.d, col0 + k)
                               : 0.0f;
    if (kAligned && col0 + kColumnsPerLane <= args.d) {  // d % 8 == 0: 8-byte aligned
      __nv_bfloat162 packed[2] = {__floats2bfloat162_rn(x[0], x[1]), __floats2bfloat162_rn(x[2], x[3])};
      *reinterpret_cast<uint2*>(row + col0) = *reinterpret_cast<const uint2*>(packed);
    } else {
#pragma unroll
      for (int k = 0; k < kColumnsPerLane; ++k)
        if (col0 + k < args.d) row[col0 + k] = __float2bfloat16(x[k]);
    }
  }
}

// A dE block's part and column tile, by the ticket it draws when it starts:
// a part waits only for parts with smaller tickets, which started before it
// (resident or done), so the turns below cannot deadlock.
struct DePart {
  int4 part;  // token block, part index, first item, end item
  int64_t column_tile;
  int* turn;
};
__device__ __forceinline__ DePart draw_de_part(const ProductArgs& args, int64_t d_tiles) {
  __shared__ int ticket;
  if (threadIdx.x == 0) ticket = atomicAdd(args.de_ticket, 1);
  __syncthreads();
  DePart out;
  out.part = args.de_parts[ticket % args.de_part_count];
  out.column_tile = ticket / args.de_part_count;
  out.turn = args.de_turns + static_cast<int64_t>(out.part.x) * d_tiles + out.column_tile;
  return out;
}
// Wait until the output tile's earlier parts have added theirs; then, after
// this block's adds, pass the turn on.
__device__ __forceinline__ void wait_turn(const int* turn, int part) {
  if (threadIdx.x == 0 && part > 0) {
    while (atomicAdd(const_cast<int*>(turn), 0) != part) __nanosleep(100);
    __threadfence();
  }
  __syncthreads();
}
__device__ __forceinline__ void pass_turn(int* turn, int part) {
  __threadfence();  // this thread's adds are visible before the turn moves
  __syncthreads();
  if (threadIdx.x == 0) atomicExch(turn, part + 1);
}

template <bool kWgmma, bool kAligned>
__global__ void __launch_bounds__(256, product_blocks_per_sm(kWgmma))
    de_products_bf16(ProductArgs args, const __nv_bfloat16* __restrict__ c, float* __restrict__ de_acc,
                     int64_t d_tiles) {
  extern __shared__ __align__(16) unsigned char shared[];
  const DePart work = draw_de_part(args, d_tiles);
  const int64_t block = work.part.x, d0 = work.column_tile * kTile;
  const int* kept = args.slot_of + block * args.tiles;
  // Items: positions in the token block's list of kept tiles that fall in this chunk.
  const int* list = args.block_lists + block * (args.tiles + 1);
  const int2 range = make_int2(work.part.z, work.part.w);
  using Acc = Accumulators<kWgmma>;
  Acc acc;
  acc.zero();
  run_products<kWgmma, false, kAligned>(
      acc, shared, [&](int item) { return item < range.y ? item : -1; },
      [&](int item, int step, bool with_s) {
        const int tile = list[1 + item];
        StepSource source{with_s ? slot_tile<const __nv_bfloat16>(args.space, kept[tile] - args.first_slot) : nullptr,
                          step, {}};
        const int64_t pos0 = static_cast<int64_t>(tile) * kTile + step * kStep;
#pragma unroll
        for (int j = 0; j < kRowsPerThread; ++j)
          source.rows[j] = pos0 + step_row(j) < args.v ? args.order[pos0 + step_row(j)] : -1;
        return source;
      },
      range.x, c, args.d, d0);  // C's rows in vocabulary order: gathered
  const float* sums = stage_sums(acc, shared);
  wait_turn(work.turn, work.part.y);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t col0 = d0 + lane * kColumnsPerLane;
  for (int r = warp; r < kTile; r += 8) {
    const int64_t place = block * kTile + r;
    if (place >= args.n) break;
    const float* add = sums + r * kSumsPitch + lane * kColumnsPerLane;
    float* out = de_acc + row_at(args, place) * args.d + col0;
    // L2, not L1: an earlier part on another SM wrote it.
    if (kAligned && col0 + kColumnsPerLane <= args.d) {  // d % 8 == 0: 16-byte aligned
      float4 v = __ldcg(reinterpret_cast<const float4*>(out));
      v.x += add[0], v.y += add[1], v.z += add[2], v.w += add[3];
      __stcg(reinterpret_cast<float4*>(out), v);
    } else {
#pragma unroll
      for (int k = 0; k < kColumnsPerLane; ++k)
        if (col0 + k < args.d) __stcg(out + k, __ldcg(out + k) + add[k]);
    }
  }
  pass_turn(work.turn, work.part.y);
}

// ------------------------------------------------------------------ fp32
// 64×64 output tiles, a 16×16 grid of threads with 4×4 outputs each; the
// operands from global memory through shared memory, one item at a time.
constexpr int kTile32 = 64, kPitch32 = 65;

template <bool kTransposeS, class RowOf>
__device__ __forceinline__ void fp32_item(float (&acc)[4][4], const float* __restrict__ s,
                                          const float* __restrict__ src, int64_t d, int64_t d0, RowOf&& row_of,
                                          float* a_tile, float* b_tile) {
  for (int i = threadIdx.x; i < kTile32 * kTile32; i += blockDim.x) {
    const int r = i / kTile32, k = i % kTile32;
    a_tile[r * kPitch32 + k] = s[i];
    const int64_t row = row_of(r);
    b_tile[r * kPitch32 + k] = row >= 0 && d0 + k < d ? src[row * d + d0 + k] : 0.0f;
  }
  __syncthreads();
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int k = 0; k < kTile32; ++k)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = ty + 16 * i;
      const float a = kTransposeS ? a_tile[k * kPitch32 + m] : a_tile[m * kPitch32 + k];
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a, b_tile[k * kPitch32 + tx + 16 * j], acc[i][j]);
    }
  __syncthreads();
}

__global__ void __launch_bounds__(256) dc_products_fp32(ProductArgs args, const float* __restrict__ e,
                                                        float* __restrict__ dc) {
  __shared__ float a_tile[kTile32 * kPitch32], b_tile[kTile32 * kPitch32];
  const int64_t tile = args.tiles_with_slots[args.kept_tile_begin + blockIdx.y];
  const int64_t d0 = static_cast<int64_t>(blockIdx.x) * kTile32;
  float acc[4][4] = {};
  for (int slot = args.offsets[tile]; slot < args.offsets[tile + 1]; ++slot) {
    const int64_t row0 = static_cast<int64_t>(args.slot_block[slot]) * kTile32;
    fp32_item<true>(acc, slot_tile<const float>(args.space, slot - args.first_slot), e, args.d, d0,
                    [&](int r) { return row0 + r < args.n ? row_at(args, row0 + r) : int64_t{-1}; },
                    a_tile, b_tile);
  }
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < 4; ++i) {
    const int64_t pos = tile * kTile32 + ty + 16 * i;
    if (pos >= args.v) continue;
    const int2 targets = row_targets(tile_targets(args, tile), pos, args.sorted_position);
    for (int j = 0; j < 4; ++j) {
      const int64_t col = d0 + tx + 16 * j;
      if (col < args.d)
        dc[static_cast<int64_t>(args.order[pos]) * args.d + col] =
            acc[i][j] + tail_share(args, tile, col) + target_terms(targets, args.sorted_token, args.coefficient, e, args.d, col);
    }
  }
}

__global__ void __launch_bounds__(256) de_products_fp32(ProductArgs args, const float* __restrict__ c,
                                                        float* __restrict__ de_acc) {
  __shared__ float a_tile[kTile32 * kPitch32], b_tile[kTile32 * kPitch32];
  const int4 part = args.de_parts[blockIdx.x];  // one part per token block: no turns
  const int64_t block = part.x, d0 = static_cast<int64_t>(blockIdx.y) * kTile32;
  const int* kept = args.slot_of + block * args.tiles;
  const int* list = args.block_lists + block * (args.tiles + 1);
  const int2 range = make_int2(part.z, part.w);
  float acc[4][4] = {};  // a part is never empty
  for (int item = range.x; item < range.y; ++item) {
    const int64_t tile = list[1 + item];
    const int64_t pos0 = tile * kTile32;
    fp32_item<false>(acc, slot_tile<const float>(args.space, kept[tile] - args.first_slot), c, args.d, d0,
                     [&](int r) { return pos0 + r < args.v ? static_cast<int64_t>(args.order[pos0 + r]) : int64_t{-1}; },
                     a_tile, b_tile);
  }
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < 4; ++i) {
    const int64_t place = block * kTile32 + ty + 16 * i;
    if (place >= args.n) continue;
    const int64_t row = row_at(args, place);
    for (int j = 0; j < 4; ++j) {
      const int64_t col = d0 + tx + 16 * j;
      if (col < args.d) de_acc[row * args.d + col] += acc[i][j];
    }
  }
}

// The dC rows of tiles without a kept token block: the dropped tail's share
// (or zeros), plus the dropped targets' terms on the rows that have some.
// One item: a group of a tile's rows (its 128 rows are 1–2 MB of dC at
// gemma2, too much for one block to write).
constexpr int64_t kUnkeptRowGroups = 16;
template <typename T>
__device__ void unkept_row_group(const ProductArgs& args, int64_t tile, int64_t group, const T* __restrict__ e,
                                 T* __restrict__ dc) {
  if (args.offsets[tile + 1] > args.offsets[tile]) return;  // the products' blocks write this tile
  const int64_t group_rows = (args.tile_cols + kUnkeptRowGroups - 1) / kUnkeptRowGroups;
  const int64_t first = tile * args.tile_cols + group * group_rows;
  const int64_t tile_end = (tile + 1) * args.tile_cols < args.v ? (tile + 1) * args.tile_cols : args.v;
  const int64_t last = first + group_rows < tile_end ? first + group_rows : tile_end;
  if (first >= last) return;
  const int2 range = tile_targets(args, tile);
  constexpr int kPerVector = 16 / sizeof(T);
  const bool vectors = (args.d * sizeof(T)) % 16 == 0;
  auto share_piece = [&](int64_t x) {  // the tile's share in columns x·kPerVector …, as one 16-byte store
    T values[kPerVector];
#pragma unroll
    for (int k = 0; k < kPerVector; ++k) values[k] = from_float<T>(tail_share(args, tile, x * kPerVector + k));
    return *reinterpret_cast<const uint4*>(values);
  };
  if (range.x == range.y && vectors) {  // the common case: every row the same
    for (int64_t x = threadIdx.x; x < args.d / kPerVector; x += blockDim.x) {
      const uint4 packed = share_piece(x);
      for (int64_t pos = first; pos < last; ++pos)
        reinterpret_cast<uint4*>(dc + static_cast<int64_t>(args.order[pos]) * args.d)[x] = packed;
    }
    return;
  }
  for (int64_t pos = first; pos < last; ++pos) {
    const int2 targets = row_targets(range, pos, args.sorted_position);
    T* row = dc + static_cast<int64_t>(args.order[pos]) * args.d;
    if (targets.x == targets.y && vectors) {  // a row without targets in a tile with some: the share alone
      for (int64_t x = threadIdx.x; x < args.d / kPerVector; x += blockDim.x)
        reinterpret_cast<uint4*>(row)[x] = share_piece(x);
      continue;
    }
    for (int64_t col = threadIdx.x; col < args.d; col += blockDim.x)
      row[col] = from_float<T>(tail_share(args, tile, col) +
                               target_terms(targets, args.sorted_token, args.coefficient, e, args.d, col));
  }
}

// A persistent grid (kUnkeptBlocksPerSm blocks an SM) walks the items: fewer
// blocks to launch and retire than one per item.
constexpr int kUnkeptBlocksPerSm = 8;
template <typename T>
__global__ void dc_unkept_rows(ProductArgs args, const T* __restrict__ e, T* __restrict__ dc) {
  const int64_t items = (args.tile_end - args.tile_begin) * kUnkeptRowGroups;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x)
    unkept_row_group(args, args.tile_begin + item / kUnkeptRowGroups, item % kUnkeptRowGroups, e, dc);
}

// dc_unkept_rows' block: a thread per 16-byte piece of a row (whole warps, 128 to 1024), so that the common
// case's one pass over D keeps every warp busy (D = 2304 in bf16: 288 pieces; 256 threads left 7 warps idle
// for the last 32).
unsigned unkept_rows_threads(const Problem& p) {
  const int64_t pieces = (p.d * static_cast<int64_t>(p.element_bytes()) + 15) / 16;
  return static_cast<unsigned>(std::clamp<int64_t>((pieces + 31) / 32 * 32, 128, 1024));
}

// dE = dE_acc + a_i C_{t_i} (the target's exact term), in the output dtype
// (Out = float: in place, into the accumulator).
// A thread takes 4 consecutive elements of one row (d % 4 == 0: one 16-byte load), else 1.
template <typename T, typename Out, int kPer>
__global__ void finish_de_kernel(const float* de_acc, const float* __restrict__ coefficient,
                                 const int64_t* __restrict__ targets, const T* __restrict__ c, int64_t n, int64_t d,
                                 Out* de) {  // fp32: de is de_acc itself
  const int64_t x = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kPer;
  if (x >= n * d) return;
  const int64_t i = x / d, k = x % d;
  float value[kPer];
  if constexpr (kPer == 4) {
    const float4 v = *reinterpret_cast<const float4*>(de_acc + x);
    value[0] = v.x, value[1] = v.y, value[2] = v.z, value[3] = v.w;
  } else {
    value[0] = de_acc[x];
  }
  const float a = coefficient[i];
  if (a != 0.0f)
#pragma unroll
    for (int j = 0; j < kPer; ++j) value[j] += a * to_float(c[targets[i] * d + k + j]);
#pragma unroll
  for (int j = 0; j < kPer; ++j) de[x + j] = from_float<Out>(value[j]);
}

}  // namespace

void unkept_dc_rows(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers, const TailSums& tail,
                    void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  const int* sorted = buffers.sorted_targets;
  ProductArgs args{};
  args.offsets = buffers.kept_counts + plan.tiles;  // slot_offsets_kernel's
  args.order = buffers.forward.kept.vocabulary_order;
  args.n = p.n, args.d = p.d, args.v = p.v, args.tiles = plan.tiles, args.tile_begin = 0, args.tile_end = plan.tiles;
  args.sorted_position = sorted;
  args.sorted_token = sorted + p.n;
  args.coefficient = buffers.target_coefficient;
  args.tile_target_offsets = sorted + 2 * p.n;
  args.tail_sums = tail.sums;
  args.tail_ld = tail.ld;
  args.tile_cols = plan.tile_cols;
  const unsigned grid = static_cast<unsigned>(
      std::min<int64_t>(plan.tiles * kUnkeptRowGroups, int64_t{kUnkeptBlocksPerSm} * multiprocessor_count()));
  if (p.dtype == Dtype::kBFloat16)
    dc_unkept_rows<__nv_bfloat16><<<grid, unkept_rows_threads(p), 0, stream>>>(
        args, reinterpret_cast<const __nv_bfloat16*>(in.e.get()), static_cast<__nv_bfloat16*>(dc));
  else
    dc_unkept_rows<float><<<grid, unkept_rows_threads(p), 0, stream>>>(args, reinterpret_cast<const float*>(in.e.get()),
                                                                      static_cast<float*>(dc));
  CCE_CHECK_LAUNCH();
}

void kept_products(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers, const KeptTiles& kept,
                   const TokenBlocks& blocks, const void* e_in_token_order, const TailSums& tail, const SlotSpace& space,
                   int64_t first_slot, int64_t tile_begin, int64_t tile_end,
                   float* de_acc, void* dc, cudaStream_t stream, SideStream& side, HostTables& host) {
  const Problem& p = in.problem;
  const int* slots = buffers.slots;
  const int64_t pairs = plan.tiles * plan.token_blocks;
  const int* sorted = buffers.sorted_targets;
  const auto first_kept = std::lower_bound(kept.tiles_with_slots.begin(), kept.tiles_with_slots.end(), tile_begin);
  const auto last_kept = std::lower_bound(kept.tiles_with_slots.begin(), kept.tiles_with_slots.end(), tile_end);
  const int* counts = buffers.kept_counts;
  ProductArgs args{space,
                   first_slot,
                   counts + plan.tiles,
                   slots,
                   slots + 2 * pairs,
                   counts + 2 * plan.tiles + 1,
                   first_kept - kept.tiles_with_slots.begin(),
                   buffers.block_lists,
                   buffers.forward.kept.vocabulary_order,
                   blocks.token_order,
                   p.n,
                   p.d,
                   p.v,
                   plan.tiles,
                   tile_begin,
                   tile_end,
                   sorted,
                   sorted + p.n,
                   buffers.target_coefficient,
                   sorted + 2 * p.n,
                   nullptr,
                   0,
                   nullptr,
                   nullptr,
                   tail.sums,
                   tail.ld,
                   plan.tile_cols};
  const unsigned d_tiles = static_cast<unsigned>((p.d + plan.tile_cols - 1) / plan.tile_cols);
  const unsigned kept_tiles = static_cast<unsigned>(last_kept - first_kept);
  // dE's parts of this chunk (found here, not by every block). A token block
  // whose rows need many tiles (grouped tokens put such rows together) has a
  // long list: it is cut into parts of at most `cap` items, about what a
  // block does when the chunk's dE work is shared evenly, so that one block
  // does not hold up the chunk. bf16 only; fp32 keeps one part per block.
  int* de_space = buffers.de_parts;
  std::vector<int2> ranges(static_cast<size_t>(plan.token_blocks));
  int64_t items = 0;
  for (int64_t b = 0; b < plan.token_blocks; ++b) {
    const int* list = kept.block_lists.data() + b * (plan.tiles + 1);
    const int* lo = std::lower_bound(list + 1, list + 1 + list[0], static_cast<int>(tile_begin));
    const int* hi = std::lower_bound(lo, list + 1 + list[0], static_cast<int>(tile_end));
    ranges[b] = make_int2(static_cast<int>(lo - (list + 1)), static_cast<int>(hi - (list + 1)));
    items += ranges[b].y - ranges[b].x;
  }
  int64_t cap = std::numeric_limits<int>::max();
  if (p.dtype == Dtype::kBFloat16)
    cap = std::max<int64_t>(kLeastDePart, (items * d_tiles + 2 * multiprocessor_count() - 1) / (2 * multiprocessor_count()));
  std::vector<int4> parts;
  for (int64_t part = 0, more = 1; more; ++part) {
    more = 0;
    for (int64_t b = 0; b < plan.token_blocks; ++b) {
      const int64_t first = ranges[b].x + part * cap;
      if (first >= ranges[b].y) continue;
      const int64_t end = std::min<int64_t>(first + cap, ranges[b].y);
      parts.push_back(make_int4(static_cast<int>(b), static_cast<int>(part), static_cast<int>(first), static_cast<int>(end)));
      more |= end < ranges[b].y;
    }
  }
  args.de_parts = reinterpret_cast<const int4*>(de_space);
  args.de_part_count = static_cast<int64_t>(parts.size());
  args.de_turns = de_space + 4 * de_part_capacity(plan);
  args.de_ticket = args.de_turns + plan.token_blocks * de_column_tiles(p);
  // x: D's column tiles, so that the blocks of the chunk's first (most kept,
  // longest) tiles are dispatched first, all their columns together.
  const dim3 dc_grid(d_tiles, kept_tiles);
  const unsigned de_blocks = static_cast<unsigned>(parts.size()) * d_tiles;
  // dE's blocks run on the side stream, beside dC's (they read the same S tiles and write other outputs). Their
  // parts and turns go over on it first, beside the recomputation: after the decision's read-backs (this call's
  // scratch is the stream's from there on), not after the recomputation, which dC's blocks then follow at once.
  side.create();
  CCE_CUDA_CHECK(cudaStreamWaitEvent(side.stream, host.read_backs_done, 0));
  host.sent.send(de_space, parts.data(), parts.size() * sizeof(int4), side.stream);
  CCE_CUDA_CHECK(cudaMemsetAsync(args.de_turns, 0, static_cast<size_t>(plan.token_blocks * de_column_tiles(p) + 1) * 4,
                                 side.stream));
  CCE_CUDA_CHECK(cudaEventRecord(side.fork, stream));
  CCE_CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.fork, 0));
  if (p.dtype == Dtype::kBFloat16) {
    auto launch = [&](auto wgmma, auto aligned) {
      constexpr bool kWgmma = decltype(wgmma)::value, kAligned = decltype(aligned)::value;
      // dC's rows by TMA where they are consecutive (dc_rows_by_tma): E's own rows in their order, or the copy.
      const void* e_rows = blocks.token_order == nullptr ? in.e.get() : e_in_token_order;
      const bool rows_by_tma = kWgmma && e_rows != nullptr;
      auto dc_kernel = rows_by_tma ? dc_products_bf16<kWgmma, kAligned, kWgmma> : dc_products_bf16<kWgmma, kAligned, false>;
      auto de_kernel = de_products_bf16<kWgmma, kAligned>;
      constexpr size_t kShared = product_shared_bytes(kWgmma);
      allow_dynamic_shared_memory(dc_kernel, kShared);
      allow_dynamic_shared_memory(de_kernel, kShared);
      const CUtensorMap e_map = rows_by_tma ? make_bf16_tensor_map(e_rows, p.n, p.d, kStep) : CUtensorMap{};
      if (de_blocks > 0) {
        de_kernel<<<de_blocks, 256, kShared, side.stream>>>(args, reinterpret_cast<const __nv_bfloat16*>(in.c.get()),
                                                             de_acc, static_cast<int64_t>(d_tiles));
        CCE_CHECK_LAUNCH();
      }
      if (kept_tiles > 0 && dc != nullptr) {
        dc_kernel<<<dc_grid, 256, kShared, stream>>>(args, reinterpret_cast<const __nv_bfloat16*>(in.e.get()),
                                                     static_cast<__nv_bfloat16*>(dc), e_map);
        CCE_CHECK_LAUNCH();
      }
    };
    // The block-level path of the tile engine says which products run here.
    if (choose_block_path(p) == TilePath::kWgmma) launch(std::true_type{}, std::true_type{});
    else if (p.d % 8 == 0) launch(std::false_type{}, std::true_type{});
    else launch(std::false_type{}, std::false_type{});
  } else {
    if (kept_tiles > 0 && dc != nullptr) {
      dc_products_fp32<<<dc_grid, 256, 0, stream>>>(args, reinterpret_cast<const float*>(in.e.get()),
                                                    static_cast<float*>(dc));
      CCE_CHECK_LAUNCH();
    }
    if (!parts.empty()) {
      de_products_fp32<<<dim3(static_cast<unsigned>(parts.size()), d_tiles), 256, 0, side.stream>>>(
          args, reinterpret_cast<const float*>(in.c.get()), de_acc);
      CCE_CHECK_LAUNCH();
    }
  }
  CCE_CUDA_CHECK(cudaEventRecord(side.join, side.stream));
  CCE_CUDA_CHECK(cudaStreamWaitEvent(stream, side.join, 0));
}

bool dc_rows_by_tma(const Problem& p) {
  return p.dtype == Dtype::kBFloat16 && choose_block_path(p) == TilePath::kWgmma;
}

void SideStream::create() {
  if (stream != nullptr) return;
  int least = 0, greatest = 0;  // dE's blocks are the chunk's longest: dispatched first
  CCE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CCE_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest));
  CCE_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CCE_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
}

SideStream::~SideStream() {  // no throwing from a destructor: errors here are ignored
  if (join != nullptr) cudaEventDestroy(join);
  if (fork != nullptr) cudaEventDestroy(fork);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

namespace {
template <bool kInPlace>
void launch_finish_de(const DeviceInputs& in, const BackwardBuffers& buffers, const float* de_acc, void* de,
                      cudaStream_t stream) {
  const Problem& p = in.problem;
  const int64_t count = p.n * p.d;
  const float* coefficient = buffers.target_coefficient;
  dispatch_dtype(p.dtype, [&](auto element_type) {
    using T = decltype(element_type);
    using Out = std::conditional_t<kInPlace, float, T>;
    auto launch = [&](auto per) {
      constexpr int kPer = decltype(per)::value;
      const unsigned blocks = static_cast<unsigned>((count / kPer + 255) / 256);
      finish_de_kernel<T, Out, kPer><<<blocks, 256, 0, stream>>>(
          de_acc, coefficient, in.targets.get(), reinterpret_cast<const T*>(in.c.get()), p.n, p.d, static_cast<Out*>(de));
      CCE_CHECK_LAUNCH();
    };
    if (p.d % 4 == 0) launch(std::integral_constant<int, 4>{});
    else launch(std::integral_constant<int, 1>{});
  });
}
}  // namespace

void finish_de(const DeviceInputs& in, const BackwardBuffers& buffers, const float* de_acc, void* de, cudaStream_t stream) {
  launch_finish_de<false>(in, buffers, de_acc, de, stream);
}

void add_target_terms(const DeviceInputs& in, const BackwardBuffers& buffers, float* de_acc, cudaStream_t stream) {
  launch_finish_de<true>(in, buffers, de_acc, de_acc, stream);
}

}  // namespace cce::s09
