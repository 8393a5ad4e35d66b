// Exercise 09_deterministic_products (README.md beside this file): generated from ../kept_tiles.cu by
// scripts/exercise.py; write the EXERCISE blocks.
#include "common/exercise.h"
// Stage 09's bookkeeping of stage 08's decision (the kept pairs' slots, each
// token block's list of kept tiles, the dropped targets sorted by position)
// and the recomputation of the kept tiles' S into their slots.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <cub/block/block_scan.cuh>

#include "common/check.h"
#include "common/dependent_launch.cuh"
#include "common/device_math.cuh"
#include "common/radix_sort.cuh"
#include "common/sort_pairs.h"
#include "common/tile/tile_path.cuh"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/online_fold.cuh"
#include "stages/06_fused_backward/backward_tile.cuh"
#include "stages/09_deterministic_products/deterministic_products.h"
#include "stages/09_deterministic_products/slot_space.cuh"

namespace cce::s09 {
namespace {


constexpr int kThreads = 256;
unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// Slots in tile order, then token block order: the order every later sum
// follows. A warp per tile, 32 token blocks per step.
__global__ void fill_slots_kernel(const uint8_t* __restrict__ flags, const int* __restrict__ offsets, int64_t tiles,
                                  int64_t token_blocks, int* __restrict__ slot_block, int* __restrict__ slot_tile,
                                  int* __restrict__ slot_of) {
  wait_for_kernel_ahead();
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (tile >= tiles) return;
  int slot = offsets[tile];
  for (int64_t b0 = 0; b0 < token_blocks; b0 += 32) {
    const int64_t b = b0 + lane;
    const bool kept = b < token_blocks && flags[tile * token_blocks + b] != 0;
    // EXERCISE(the slot numbering): consecutive slots for kept pairs (a warp ballot), -1 for dropped
    CCE_EXERCISE_MISSING("09_deterministic_products", "the slot numbering");
    // END EXERCISE
  }
}

// offsets[T] = the kept pairs of the tiles before T (a scan of the counts), and
// the tiles with a kept pair ascending: one block, a step of 1024 tiles at a
// time. The host makes the same tables from the counts it reads back.
constexpr int kOffsetThreads = 1024;
__global__ void __launch_bounds__(kOffsetThreads)
    slot_offsets_kernel(const int* __restrict__ counts, int64_t tiles, int* __restrict__ offsets,
                        int* __restrict__ tiles_with_slots) {
  wait_for_kernel_ahead();
  using Scan = cub::BlockScan<int, kOffsetThreads>;
  __shared__ typename Scan::TempStorage scan;
  int slots_before = 0, listed_before = 0;  // the same in every thread
  for (int64_t first = 0; first < tiles; first += kOffsetThreads) {
    const int64_t tile = first + threadIdx.x;
    const int count = tile < tiles ? counts[tile] : 0;
    int slot = 0, place = 0, step_slots = 0, step_listed = 0;
    Scan(scan).ExclusiveSum(count, slot, step_slots);
    __syncthreads();
    Scan(scan).ExclusiveSum(count > 0 ? 1 : 0, place, step_listed);
    __syncthreads();
    if (tile < tiles) {
      offsets[tile] = slots_before + slot;
      if (count > 0) tiles_with_slots[listed_before + place] = static_cast<int>(tile);
    }
    slots_before += step_slots;
    listed_before += step_listed;
  }
  if (threadIdx.x == 0) offsets[tiles] = slots_before;
}

// dC's owners add the dropped targets' terms (stage 08's coefficients a_i,
// nonzero exactly where t_i's tile is dropped for i's block) row by row:
// the tokens sorted by target position, those without a term last, at
// tiles·tile_cols (past every tile's positions).
__global__ void target_key_kernel(const float* __restrict__ coefficient, const int64_t* __restrict__ position,
                                  int64_t n, int64_t no_term_key, int* __restrict__ sort_key, int* __restrict__ token) {
  wait_for_kernel_ahead();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  sort_key[i] = static_cast<int>(coefficient[i] != 0.0f ? position[i] : no_term_key);
  token[i] = static_cast<int>(i);
}

// off[T] = the first entry of the sorted target positions at or past T·tile_cols (T = 0..tiles).
__global__ void tile_target_offsets_kernel(const int* __restrict__ sorted_position, int64_t n, int64_t tiles,
                                           int64_t tile_cols, int* __restrict__ offsets) {
  wait_for_kernel_ahead();
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tile > tiles) return;
  offsets[tile] = lower_bound_index(sorted_position, 0, static_cast<int>(n), tile * tile_cols);
}

// Each token block's kept tiles, ascending: lists[b] = {count, tiles...},
// written twice: for the products on the device, and into the host's
// page-locked memory (with unified addressing the device writes it), which
// the host reads after the decision's wait: no copy to queue.
__global__ void fill_block_lists_kernel(const uint8_t* __restrict__ flags, int64_t tiles, int64_t token_blocks,
                                        int* __restrict__ lists, int* __restrict__ lists_on_host) {
  wait_for_kernel_ahead();
  __shared__ int warp_counts[32];
  __shared__ int base;
  const int64_t b = blockIdx.x;
  int* list = lists + b * (tiles + 1);
  int* host_list = lists_on_host + b * (tiles + 1);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  for (int64_t t0 = 0; t0 < tiles; t0 += blockDim.x) {
    const int64_t t = t0 + threadIdx.x;
    const bool kept = t < tiles && flags[t * token_blocks + b] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, kept);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = base + __popc(ballot & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) before += warp_counts[w];
    if (kept) list[1 + before] = host_list[1 + before] = static_cast<int>(t);
    __syncthreads();
    if (threadIdx.x == 0)
      for (int w = 0; w < warps; ++w) base += warp_counts[w];
    __syncthreads();
  }
  if (threadIdx.x == 0) list[0] = host_list[0] = base;
}

// One block per run of consecutive kept tiles of one token block (a few
// tiles, so that the product's pipeline runs on from tile to tile): each
// tile's logits are recomputed (columns are sorted positions, read from C
// through the order), turned into S_ij = g_i·(p_ij − [j = t_i])·softcap'(z_ij)
// (0 for rows without a gradient and past V) and written compactly to the
// tile's slot (slot − first_slot in the chunk's slot space), laid out as
// s_index says.
// Two blocks per SM on wgmma (128 registers suffice); the mma.sync tiles
// would spill at that bound.
template <class Tile>
constexpr int kRecomputeBlocksPerSm = std::is_same_v<Tile, TileProductWgmma> ? 2 : 1;

template <class Tile, typename T, bool kAligned>
__global__ void __launch_bounds__(256, kRecomputeBlocksPerSm<Tile>)
    recompute_kept_kernel(const T* __restrict__ e, const T* __restrict__ c, const int64_t* __restrict__ position,
                          const float* __restrict__ lse, const float* __restrict__ grad_scale, int64_t n, int64_t d,
                          int64_t v, float softcap, const int* __restrict__ order,
                          const int* __restrict__ token_order, const int* __restrict__ slot_of, int64_t tiles,
                          const int4* __restrict__ runs, int64_t first_slot, SlotSpace space) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  RowGradientInputs<Tile> rows(shared_bytes + Tile::kSharedBytes);
  const int4 run = runs[blockIdx.x];  // token block, first tile, end tile
  const int64_t row0 = static_cast<int64_t>(run.x) * Tile::kBM;  // the block's first place in the token order
  for (int i = threadIdx.x; i < Tile::kBM; i += blockDim.x) {  // the rows' inputs; rows.target: sorted positions
    const int64_t row = row0 + i >= n ? -1 : token_order != nullptr ? token_order[row0 + i] : row0 + i;
    rows.lse[i] = row >= 0 ? lse[row] : 0.0f;
    rows.g[i] = row >= 0 ? grad_scale[row] : 0.0f;
    rows.target[i] = row >= 0 ? static_cast<int>(position[row]) : -1;
  }
  __syncthreads();
  Tile tile;
  // S of the tile at col0 into its slot. What does not depend on the column is settled once: per tile, the
  // softcap and whether the tile ends before V (template arguments, so that the common case carries no test of
  // either); per row, the gradient scale, the LSE and the target's column in this tile.
  const float inv_softcap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  auto write_tile = [&](int64_t col0, auto softcapped, auto ends_before_v) {
    constexpr bool kSoftcap = decltype(softcapped)::value, kEndsBeforeV = decltype(ends_before_v)::value;
    const int64_t slot = slot_of[static_cast<int64_t>(run.x) * tiles + col0 / Tile::kBN];
    T* out = slot_tile<T>(space, slot - first_slot);
    const int64_t cols_before_v = v - col0;
#pragma unroll
    for (int r = 0; r < Tile::kRows; ++r) {
      // The row's inputs once (for the compiler, the stores below could alias shared memory).
      const int tr = Tile::row_of(r);
      const float g = rows.g[tr], row_lse = rows.lse[tr];
      const int64_t target_offset = rows.target[tr] - col0;
      const int target_col = target_offset >= 0 && target_offset < Tile::kBN ? static_cast<int>(target_offset) : -1;
      auto s_of = [&](int cc) {
        const int col = Tile::col_of(cc);
        float z = tile.z(r, cc);
        if constexpr (kSoftcap) z = apply_softcap(z, softcap);
        float s = softmax_gradient<kSoftcap>(z - row_lse, z, col == target_col, g, inv_softcap);
        if constexpr (!kEndsBeforeV) s = col < cols_before_v ? s : 0.0f;
        return g != 0.0f ? s : 0.0f;  // rows without a gradient (ignored, past N) are zeros, whatever z is
      };
      if constexpr (sizeof(T) == 2 && Tile::kColumnsShareLaneMod4) {
        // m16n8 fragments: columns cc and cc + 1 (cc even) are adjacent, one 4-byte store.
#pragma unroll
        for (int cc = 0; cc < Tile::kCols; cc += 2)
          *reinterpret_cast<__nv_bfloat162*>(out + s_index<T, Tile::kBN>(tr, Tile::col_of(cc))) =
              __floats2bfloat162_rn(s_of(cc), s_of(cc + 1));
      } else {
#pragma unroll
        for (int cc = 0; cc < Tile::kCols; ++cc)
          out[s_index<T, Tile::kBN>(tr, Tile::col_of(cc))] = from_float<T>(s_of(cc));
      }
    }
  };
  tile.template for_each_tile<kAligned>(e, n, row0, token_order, c, v, order, run.y, run.z, d, shared_bytes,
                                        [&](int64_t col0) {
    static_bool(softcap > 0.0f, [&](auto softcapped) {
      static_bool(col0 + Tile::kBN <= v, [&](auto before_v) { write_tile(col0, softcapped, before_v); });
    });
  });
}

}  // namespace

size_t target_sort_work_bytes(int64_t n) { return static_cast<size_t>(n) * 12 + radix_sort_pairs_temp_bytes<int>(n, false) + 256; }

void HostTables::mark_read_backs(cudaStream_t stream) {
  if (read_backs_done == nullptr)
    CCE_CUDA_CHECK(cudaEventCreateWithFlags(&read_backs_done, cudaEventDisableTiming));
  CCE_CUDA_CHECK(cudaEventRecord(read_backs_done, stream));
}

void HostTables::wait_for_read_backs() { CCE_CUDA_CHECK(cudaEventSynchronize(read_backs_done)); }

HostTables::~HostTables() {
  if (read_backs_done != nullptr) cudaEventDestroy(read_backs_done);  // no throwing from a destructor
}

KeptTiles decide_kept_tiles(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                            const float* lse, const BackwardChoice& choice, float* de_acc, void* dc, HostTables& host,
                            cudaStream_t stream) {
  const Problem& p = in.problem;
  host.read_back.reset();
  const s08::DecisionInputs inputs{&buffers.forward.kept, lse, buffers.grad_scale, choice.blocks};
  s08::decide_kept_pairs(p, s08::tile_grid(p), inputs, choice.eps, buffers.keep, buffers.kept_counts, stream);
  BackwardChoice queued = choice;
  queued.correct_tail = choice.correct_tail && choice.eps > 0.0f;  // eps 0 keeps every pair with a gradient
  return kept_tiles_from_flags(in, plan, buffers, lse, queued, de_acc, dc, host, stream);
}

KeptTiles kept_tiles_from_flags(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                                const float* lse, const BackwardChoice& choice, float* de_acc, void* dc,
                                HostTables& host, cudaStream_t stream) {
  const Problem& p = in.problem;
  KeptTiles kept;
  uint8_t* flags = buffers.keep;
  int* counts = buffers.kept_counts;
  int* offsets = counts + plan.tiles;
  int* tiles_with_slots = offsets + plan.tiles + 1;
  const s08::TileStatistics& forward = buffers.forward.kept;
  const s08::DecisionInputs inputs{&forward, lse, buffers.grad_scale, choice.blocks};

  // On the device: the targets of dropped tiles (coefficients, and the tokens
  // sorted by target position, stable, for dC's owners) and each token block's
  // list of kept tiles (dE's owners, and the host's tables: the lists come
  // back by the kernel's own writes, and the host counts each tile's pairs
  // from them).
  const size_t list_ints = static_cast<size_t>(plan.token_blocks * (plan.tiles + 1));
  kept.block_lists = {host.read_back.take<int>(list_ints), list_ints};
  {
    unsigned char* work = buffers.forward.work;  // free between forward and correction
    int* key = reinterpret_cast<int*>(work);
    int* token = key + p.n;
    void* temp = token + p.n;
    int* sorted = buffers.sorted_targets;
    float* coefficient = buffers.target_coefficient;
    s08::target_coefficients(p, s08::tile_grid(p), inputs, flags, coefficient, stream);
    launch_dependent(target_key_kernel, blocks_for(p.n), kThreads, stream, coefficient, forward.target_position, p.n,
                     plan.tiles * plan.tile_cols, key, token);
    size_t temp_bytes = radix_sort_pairs_temp_bytes<int>(p.n, false);
    sort_int_pairs(temp, temp_bytes, key, sorted, token, sorted + p.n, p.n, radix_key_bits(plan.tiles * plan.tile_cols),
                   stream);
    launch_dependent(tile_target_offsets_kernel, blocks_for(plan.tiles + 1), kThreads, stream, sorted, p.n,
                     plan.tiles, plan.tile_cols, sorted + 2 * p.n);
    launch_dependent(fill_block_lists_kernel, static_cast<unsigned>(plan.token_blocks), kThreads, stream,
        flags, plan.tiles, plan.token_blocks, buffers.block_lists, kept.block_lists.data());
  }
  host.mark_read_backs(stream);
  // What needs the flags alone runs on the GPU while the host waits for the
  // read-backs and then builds its tables below: the slots, the tail
  // correction, and dC's rows of the tiles without a kept pair.
  launch_dependent(slot_offsets_kernel, 1, kOffsetThreads, stream, counts, plan.tiles, offsets, tiles_with_slots);
  int* slots = buffers.slots;
  const int64_t pairs = plan.tiles * plan.token_blocks;
  launch_dependent(fill_slots_kernel, blocks_for(plan.tiles * 32), kThreads, stream, flags, offsets, plan.tiles,
                   plan.token_blocks, slots, slots + pairs, slots + 2 * pairs);
  if (de_acc != nullptr && choice.correct_tail) {
    if (choice.correct_dc && dc != nullptr) kept.tail = buffers.tail;
    s08::correct_dropped_tail(in, s08::tile_grid(p), inputs, flags, de_acc, kept.tail, stream);
  } else if (de_acc != nullptr) {
    CCE_CUDA_CHECK(cudaMemsetAsync(de_acc, 0, static_cast<size_t>(p.n * p.d) * sizeof(float), stream));
  }
  if (de_acc != nullptr && dc != nullptr) unkept_dc_rows(in, plan, buffers, kept.tail, dc, stream);
  // The decision's one wait: the lists are here, and every copy sent before has been made.
  host.wait_for_read_backs();
  host.sent.reset();
  const size_t tiles = static_cast<size_t>(plan.tiles);
  kept.offsets = {host.sent.take<int>(tiles + 1), tiles + 1};
  int* with_slots = host.sent.take<int>(tiles);
  // Each tile's kept pairs (the device's kept_counts, counted again from the lists), then their offsets.
  std::fill(kept.offsets.begin(), kept.offsets.end(), 0);
  for (int64_t b = 0; b < plan.token_blocks; ++b) {
    const int* list = kept.block_lists.data() + b * (plan.tiles + 1);
    for (int k = 1; k <= list[0]; ++k) ++kept.offsets[list[k] + 1];
  }
  for (size_t t = 0; t < tiles; ++t) {
    if (kept.offsets[t + 1] > 0) with_slots[kept.tiles_with_slots.count++] = static_cast<int>(t);
    kept.offsets[t + 1] += kept.offsets[t];
  }
  kept.tiles_with_slots.ptr = with_slots;
  return kept;
}

namespace {
template <class F>
void dispatch_recompute_kernel(const Problem& p, F&& f) {
  dispatch_block_path(choose_block_path(p), [&](auto tile, auto element, auto aligned) {
    using Tile = decltype(tile);
    auto kernel = recompute_kept_kernel<Tile, decltype(element), decltype(aligned)::value>;
    const size_t shared = Tile::kSharedBytes + RowGradientInputs<Tile>::kSharedBytes;
    allow_dynamic_shared_memory(kernel, shared);
    f(tile, element, kernel, shared);
  });
}
}  // namespace

int64_t recompute_resident_blocks(const Problem& p) {
  // Asked once per block path (which names the kernel): every backward calls this.
  static int known[static_cast<int>(TilePath::kWgmmaPipeline) + 1] = {};
  int& blocks = known[static_cast<int>(choose_block_path(p))];
  if (blocks == 0) {
    dispatch_recompute_kernel(p, [&](auto tile, auto, auto kernel, size_t shared) {
      CCE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, decltype(tile)::kThreads, shared));
    });
    blocks = std::max(1, blocks);
  }
  return blocks * int64_t{multiprocessor_count()};
}

void recompute_kept_tiles(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                          const float* lse, const TokenBlocks& blocks, const HostSpan<int>& runs, int64_t first_slot,
                          const SlotSpace& space, cudaStream_t stream) {
  const Problem& p = in.problem;
  const int64_t count = static_cast<int64_t>(runs.size()) / 4;
  if (count == 0) return;
  int* device_runs = buffers.recompute_runs;
  CCE_CUDA_CHECK(cudaMemcpyAsync(device_runs, runs.data(), runs.size() * 4, cudaMemcpyHostToDevice, stream));
  const int* slot_arrays = buffers.slots;
  const int64_t pairs = plan.tiles * plan.token_blocks;
  dispatch_recompute_kernel(p, [&](auto tile, auto element, auto kernel, size_t shared) {
    using T = decltype(element);
    kernel<<<static_cast<unsigned>(count), decltype(tile)::kThreads, shared, stream>>>(
        reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()),
        buffers.forward.kept.target_position, lse, buffers.grad_scale, p.n, p.d, p.v, p.softcap,
        buffers.forward.kept.vocabulary_order,
        blocks.token_order, slot_arrays + 2 * pairs, plan.tiles,
        reinterpret_cast<const int4*>(device_runs), first_slot, space);
    CCE_CHECK_LAUNCH();
  });
}

}  // namespace cce::s09
