// Stage 10's plan of the backward and its recomputation: the automatic eps
// and the token grouping (from the forward's tile statistics, before any
// logit is recomputed), the slots of the kept pairs that stage 08's decision
// keeps, and the recomputed S of the kept ones.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/radix_sort.cuh"
#include "common/tile/tile_path.cuh"
#include "common/token_reduction.h"
#include "stages/06_fused_backward/backward_tile.cuh"
#include "stages/10_plan_per_batch/plan_per_batch.h"
#include "stages/10_plan_per_batch/slot_space.cuh"
#include "stages/08_drop_before_recompute/tile_stats.cuh"

namespace cce::s10 {
namespace {

using s08::stats_max;
using s08::stats_sum;

constexpr int kThreads = 256;
unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// dropped_mass_kernel's grid (stage 08's decision's): x a tile, y token blocks
// (at most 65535, each block looping over b = y, y + gridDim.y, ...).
dim3 pair_grid(const DropPlan& plan) {
  return dim3(static_cast<unsigned>(plan.tiles), static_cast<unsigned>(std::min<int64_t>(plan.token_blocks, 65535)));
}

// The automatic eps's measure: for each (token block, tile), the largest
// candidate exponent e at which the pair would be dropped (its rows' largest
// m_iT − LSE_i below log_eps[e], stage 08's decision's test) and its rows' softmax
// mass M_iT = s_iT·exp(m_iT − LSE_i), the target's own entry left out (it is
// exact). mass[k] sums the pairs whose largest such e is kAutoFirstExponent + k,
// in fixed point (2^-32), so that the sum and the eps chosen from it do not
// depend on the order of the additions; mass[kAutoExponents] counts the rows
// with a gradient. A block per (token block, tile), as stage 08's decision.
constexpr double kMassUnit = 4294967296.0;  // 2^32
struct LogEps {
  float at[kAutoExponents];
};
__global__ void dropped_mass_kernel(const uint32_t* __restrict__ stats, const float* __restrict__ lse,
                                    const float* __restrict__ grad_scale, const float* __restrict__ target_logit,
                                    const int64_t* __restrict__ position, const int* __restrict__ token_order,
                                    int64_t n, int64_t token_blocks, int64_t tile_cols, LogEps log_eps,
                                    unsigned long long* __restrict__ mass) {
  __shared__ float warp_max[32], warp_mass[32];
  __shared__ int warp_rows[32];
  const int64_t tile = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t b = blockIdx.y; b < token_blocks; b += gridDim.y) {
    const int64_t place = b * blockDim.x + threadIdx.x;
    const int64_t row = place < n ? token_order[place] : n;
    float log_p = -INFINITY, row_mass = 0.0f;
    int with_gradient = 0;
    if (row < n && grad_scale[row] != 0.0f) {
      const uint32_t packed = stats[tile * n + row];
      log_p = stats_max(packed) - lse[row];
      row_mass = stats_sum(packed) * __expf(log_p);
      if (position[row] >= 0 && position[row] / tile_cols == tile) row_mass -= __expf(target_logit[row] - lse[row]);
      row_mass = fmaxf(row_mass, 0.0f);
      with_gradient = 1;
    }
    for (int offset = 16; offset > 0; offset /= 2) {  // a fixed order: the same sum every run
      log_p = fmaxf(log_p, __shfl_xor_sync(0xffffffffu, log_p, offset));
      row_mass += __shfl_xor_sync(0xffffffffu, row_mass, offset);
      with_gradient += __shfl_xor_sync(0xffffffffu, with_gradient, offset);
    }
    if (lane == 0) warp_max[warp] = log_p, warp_mass[warp] = row_mass, warp_rows[warp] = with_gradient;
    __syncthreads();
    if (threadIdx.x == 0) {
      float largest = -INFINITY, pair_mass = 0.0f;
      int rows = 0;
      for (int w = 0; w < warps; ++w) largest = fmaxf(largest, warp_max[w]), pair_mass += warp_mass[w], rows += warp_rows[w];
      int k = kAutoExponents - 1;  // the largest e whose test drops the pair
      while (k >= 0 && !(largest < log_eps.at[k])) --k;
      if (k >= 0 && pair_mass > 0.0f)
        atomicAdd(mass + k, static_cast<unsigned long long>(llrint(static_cast<double>(pair_mass) * kMassUnit)));
      if (tile == 0 && rows > 0) atomicAdd(mass + kAutoExponents, static_cast<unsigned long long>(rows));
    }
    __syncthreads();
  }
}

// Token grouping: a token block keeps a tile when any of its rows needs it,
// so rows that need many tiles (flat softmax) are put together, and rows
// that need few with each other. The key of row i: how many tiles hold an
// entry ≥ 2^-kGroupingExponent (m_iT − LSE_i against its log), stored as
// tiles − count so that an ascending sort puts the busiest blocks first (dE's
// longest blocks are dispatched first); rows without a gradient last.
__global__ void token_key_kernel(const float* __restrict__ grad_scale, int64_t n, int64_t tiles, bool group,
                                 int* __restrict__ key, int* __restrict__ token) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  key[i] = !group ? 0 : grad_scale[i] != 0.0f ? static_cast<int>(tiles) : static_cast<int>(tiles) + 1;
  token[i] = static_cast<int>(i);
}
// key[i] −= the row's count over kTilesPerCount tiles (grid.y): an integer
// sum, the same in any order. Many blocks: a thread per row over every tile
// would wait on 2000 dependent loads at gemma2.
constexpr int kTilesPerCount = 16;
__global__ void token_count_kernel(const uint32_t* __restrict__ stats, const float* __restrict__ lse,
                                   const float* __restrict__ grad_scale, int64_t n, int64_t tiles, float log_threshold,
                                   int* __restrict__ key) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n || grad_scale[i] == 0.0f) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kTilesPerCount;
  const int64_t last = first + kTilesPerCount < tiles ? first + kTilesPerCount : tiles;
  const float row_lse = lse[i];
  int count = 0;
  for (int64_t t = first; t < last; ++t) count += stats_max(stats[t * n + i]) - row_lse >= log_threshold ? 1 : 0;
  if (count > 0) atomicSub(key + i, count);
}
__global__ void token_place_kernel(const int* __restrict__ token_order, int64_t n, int* __restrict__ token_place) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n) token_place[token_order[k]] = static_cast<int>(k);
}

// Slots in tile order, then token block order: the order every later sum
// follows. A warp per tile, 32 token blocks per step.
__global__ void fill_slots_kernel(const uint8_t* __restrict__ flags, const int* __restrict__ offsets, int64_t tiles,
                                  int64_t token_blocks, int* __restrict__ slot_block, int* __restrict__ slot_tile,
                                  int* __restrict__ slot_of) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (tile >= tiles) return;
  int slot = offsets[tile];
  for (int64_t b0 = 0; b0 < token_blocks; b0 += 32) {
    const int64_t b = b0 + lane;
    const bool kept = b < token_blocks && flags[tile * token_blocks + b] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, kept);
    const int mine = slot + __popc(ballot & ((1u << lane) - 1u));
    if (kept) {
      slot_block[mine] = static_cast<int>(b);
      slot_tile[mine] = static_cast<int>(tile);
    }
    if (b < token_blocks) slot_of[b * tiles + tile] = kept ? mine : -1;
    slot += __popc(ballot);
  }
}

// dC's owners add the dropped targets' terms (stage 08's coefficients a_i,
// nonzero exactly where t_i's tile is dropped for i's block) row by row:
// the tokens sorted by target position, those without a term last, at
// tiles·tile_cols (past every tile's positions).
__global__ void target_key_kernel(const float* __restrict__ coefficient, const int64_t* __restrict__ position,
                                  int64_t n, int64_t no_term_key, int* __restrict__ sort_key, int* __restrict__ token) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  sort_key[i] = static_cast<int>(coefficient[i] != 0.0f ? position[i] : no_term_key);
  token[i] = static_cast<int>(i);
}

// off[T] = the first entry of the sorted target positions at or past T·tile_cols (T = 0..tiles).
__global__ void tile_target_offsets_kernel(const int* __restrict__ sorted_position, int64_t n, int64_t tiles,
                                           int64_t tile_cols, int* __restrict__ offsets) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tile > tiles) return;
  offsets[tile] = lower_bound_index(sorted_position, 0, static_cast<int>(n), tile * tile_cols);
}

// Each token block's kept tiles, ascending: lists[b] = {count, tiles...}.
__global__ void fill_block_lists_kernel(const uint8_t* __restrict__ flags, int64_t tiles, int64_t token_blocks,
                                        int* __restrict__ lists) {
  __shared__ int warp_counts[32];
  __shared__ int base;
  const int64_t b = blockIdx.x;
  int* list = lists + b * (tiles + 1);
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
    if (kept) list[1 + before] = static_cast<int>(t);
    __syncthreads();
    if (threadIdx.x == 0)
      for (int w = 0; w < warps; ++w) base += warp_counts[w];
    __syncthreads();
  }
  if (threadIdx.x == 0) list[0] = base;
}

// One block per run of consecutive kept tiles of one token block (a few
// tiles, so that the product's pipeline runs on from tile to tile): each
// tile's logits are recomputed (columns are sorted positions, read from C
// through the order), turned into S_ij = g_i·(p_ij − [j = t_i])·softcap'(z_ij)
// (0 for rows without a gradient and past V) and written compactly to the
// tile's slot (slot − first_slot in the chunk's slot space).
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
    const int64_t row = row0 + i < n ? token_order[row0 + i] : -1;
    rows.lse[i] = row >= 0 ? lse[row] : 0.0f;
    rows.g[i] = row >= 0 ? grad_scale[row] : 0.0f;
    rows.target[i] = row >= 0 ? static_cast<int>(position[row]) : -1;
  }
  __syncthreads();
  Tile tile;
  tile.template for_each_tile<kAligned>(e, n, row0, token_order, c, v, order, run.y, run.z, d, shared_bytes,
                                        [&](int64_t col0) {
    const int64_t slot = slot_of[static_cast<int64_t>(run.x) * tiles + col0 / Tile::kBN];
    T* out = slot_tile<T>(space, slot - first_slot);
#pragma unroll
    for (int r = 0; r < Tile::kRows; ++r) {
      // The row's inputs once (for the compiler, the stores below could alias shared memory).
      const int tr = Tile::row_of(r);
      const float g = rows.g[tr], row_lse = rows.lse[tr];
      const int target = rows.target[tr];
      auto s_of = [&](int cc) {
        const int64_t pos = col0 + Tile::col_of(cc);
        if (pos >= v || g == 0.0f) return 0.0f;
        const float z = apply_softcap(tile.z(r, cc), softcap);
        const float p = __expf(z - row_lse) - (pos == target ? 1.0f : 0.0f);
        return g * p * softcap_derivative(z, softcap);
      };
      if constexpr (sizeof(T) == 2 && Tile::kColumnsShareLaneMod4) {
        // m16n8 fragments: columns cc and cc + 1 (cc even) are adjacent, one 4-byte store.
#pragma unroll
        for (int cc = 0; cc < Tile::kCols; cc += 2)
          *reinterpret_cast<__nv_bfloat162*>(out + tr * Tile::kBN + Tile::col_of(cc)) =
              __floats2bfloat162_rn(s_of(cc), s_of(cc + 1));
      } else {
#pragma unroll
        for (int cc = 0; cc < Tile::kCols; ++cc) out[tr * Tile::kBN + Tile::col_of(cc)] = from_float<T>(s_of(cc));
      }
    }
  });
}

}  // namespace

size_t target_sort_work_bytes(int64_t n) { return static_cast<size_t>(n) * 12 + radix_sort_pairs_temp_bytes<int>(n, false) + 256; }

namespace {
int key_bits_for(int64_t largest_key) {  // sort only the bits the keys use
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) <= largest_key) ++bits;
  return bits;
}

// The token order of the token blocks (token_key_kernel; the identity without grouping).
void group_tokens(const Problem& p, const DropPlan& plan, const Scratch& scratch, const float* lse, bool group,
                  cudaStream_t stream) {
  int* order = scratch.get<int>("token order, each token's place in it [2][N]");
  int* place = order + p.n;
  unsigned char* work = scratch.get<unsigned char>("work buffer");  // free between forward and correction
  int* key = reinterpret_cast<int*>(work);
  int* token = key + p.n;
  int* sorted_key = token + p.n;
  void* temp = sorted_key + p.n;
  // Without grouping every key is 0: the stable sort leaves the identity.
  const float* grad_scale = scratch.get<float>("per-token grad scale [N]");
  token_key_kernel<<<blocks_for(p.n), kThreads, 0, stream>>>(grad_scale, p.n, plan.tiles, group, key, token);
  CCE_CHECK_LAUNCH();
  if (group) {
    const unsigned tile_groups = static_cast<unsigned>((plan.tiles + kTilesPerCount - 1) / kTilesPerCount);
    token_count_kernel<<<dim3(blocks_for(p.n), tile_groups), kThreads, 0, stream>>>(
        scratch.get<uint32_t>("tile statistics [tiles][N]"), lse, grad_scale, p.n, plan.tiles,
        std::log(std::ldexp(1.0f, -kGroupingExponent)), key);
    CCE_CHECK_LAUNCH();
  }
  size_t temp_bytes = radix_sort_pairs_temp_bytes<int>(p.n, false);
  CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, key, sorted_key, token, order, static_cast<int>(p.n),
                                                 0, key_bits_for(plan.tiles + 1), stream));
  token_place_kernel<<<blocks_for(p.n), kThreads, 0, stream>>>(order, p.n, place);
  CCE_CHECK_LAUNCH();
}
}  // namespace

std::vector<MemoryItem> kept_tiles_scratch(const Problem& p, const DropPlan& plan) {
  const size_t n = static_cast<size_t>(p.n), pairs = static_cast<size_t>(plan.tiles * plan.token_blocks);
  return {
      {"per-token grad scale [N]", n * 4},
      {"target coefficient [N]", n * 4},
      {"targets sorted by position: positions, tokens [2][N], tile offsets [tiles+1]",
       n * 8 + static_cast<size_t>(plan.tiles + 1) * 4},
      {"dE parts [token blocks + pairs/16][4], turns [token blocks][D/64], ticket",
       static_cast<size_t>(4 * de_part_capacity(plan) + plan.token_blocks * de_column_tiles(p) + 1) * 4},
      {"keep flags [tiles][token blocks]", pairs},
      {"dropped mass per eps, rows with a gradient [candidates + 1]", (kAutoExponents + 1) * 8},
      {"token order, each token's place in it [2][N]", n * 8},
      {"kept counts [tiles], slot offsets [tiles+1], tiles with slots [tiles]",
       static_cast<size_t>(3 * plan.tiles + 1) * 4},
      {"kept tiles of each token block [token blocks][1+tiles]",
       static_cast<size_t>(plan.token_blocks * (plan.tiles + 1)) * 4},
      {"slots: token block, tile, slot of pair [3][pairs]", pairs * 12},
      {"recompute runs [slots]", static_cast<size_t>(plan.chunk_slots()) * 16},
  };
}

int choose_drop_exponent(const double (&dropped)[kAutoExponents], double budget) {
  for (int k = 0; k < kAutoExponents; ++k)
    if (dropped[k] <= budget) return kAutoFirstExponent + k;
  return kAutoLastExponent;  // the smallest candidate: about half the tiles kept on the data measured
}

namespace {
// The automatic eps: the statistics' dropped mass at each candidate (one
// pass, a few µs), then the largest eps within the budget.
float choose_drop_eps(const Problem& p, const DropPlan& plan, const Scratch& scratch, const float* lse, double budget,
                      EpsChoice& choice, cudaStream_t stream) {
  LogEps log_eps{};
  for (int k = 0; k < kAutoExponents; ++k) log_eps.at[k] = std::log(std::ldexp(1.0f, -(kAutoFirstExponent + k)));
  auto* mass = scratch.get<unsigned long long>("dropped mass per eps, rows with a gradient [candidates + 1]");
  CCE_CUDA_CHECK(cudaMemsetAsync(mass, 0, (kAutoExponents + 1) * 8, stream));
  dropped_mass_kernel<<<pair_grid(plan), static_cast<unsigned>(plan.tile_rows), 0, stream>>>(
      scratch.get<uint32_t>("tile statistics [tiles][N]"), lse, scratch.get<float>("per-token grad scale [N]"),
      scratch.get<float>("target logit [N]"), scratch.get<int64_t>("target position [N]"),
      scratch.get<int>("token order, each token's place in it [2][N]"), p.n, plan.token_blocks, plan.tile_cols, log_eps,
      mass);
  CCE_CHECK_LAUNCH();
  unsigned long long host[kAutoExponents + 1];
  CCE_CUDA_CHECK(cudaMemcpyAsync(host, mass, sizeof host, cudaMemcpyDeviceToHost, stream));
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double rows = static_cast<double>(std::max<unsigned long long>(host[kAutoExponents], 1));
  double dropped[kAutoExponents];  // a pair dropped at e is dropped at every larger eps too
  unsigned long long above = 0;
  for (int k = kAutoExponents - 1; k >= 0; --k) above += host[k], dropped[k] = static_cast<double>(above) / kMassUnit / rows;
  const int exponent = choose_drop_exponent(dropped, budget);
  choice.dropped_mass = dropped[exponent - kAutoFirstExponent];
  std::copy(dropped, dropped + kAutoExponents, choice.candidates.begin());
  return std::ldexp(1.0f, -exponent);
}
}  // namespace

KeptTiles decide_kept_tiles(const Problem& p, const DropPlan& plan, const Scratch& scratch, const float* lse,
                            const DropSettings& settings, cudaStream_t stream) {
  group_tokens(p, plan, scratch, lse, settings.group_tokens, stream);
  const int* token_order = scratch.get<int>("token order, each token's place in it [2][N]");
  KeptTiles kept;
  kept.choice.eps = settings.dropped_mass > 0.0
                        ? choose_drop_eps(p, plan, scratch, lse, settings.dropped_mass, kept.choice, stream)
                        : settings.eps;
  const float eps = kept.choice.eps;
  const float* grad_scale = scratch.get<float>("per-token grad scale [N]");
  uint8_t* flags = scratch.get<uint8_t>("keep flags [tiles][token blocks]");
  int* counts = scratch.get<int>("kept counts [tiles], slot offsets [tiles+1], tiles with slots [tiles]");
  int* offsets = counts + plan.tiles;
  int* tiles_with_slots = offsets + plan.tiles + 1;
  const s08::TileStatistics forward = s08::sorted_forward_buffers(scratch).kept;
  const s08::DecisionInputs inputs{&forward, lse, grad_scale, s08::TokenBlocks{token_order, token_order + p.n}};
  s08::decide_kept_pairs(p, s08::tile_grid(p), inputs, eps, flags, counts, stream);
  std::vector<int> host_counts(static_cast<size_t>(plan.tiles));
  CCE_CUDA_CHECK(cudaMemcpyAsync(host_counts.data(), counts, host_counts.size() * 4, cudaMemcpyDeviceToHost, stream));

  // Meanwhile on the device: the targets of dropped tiles (coefficients, and
  // the tokens sorted by target position, stable, for dC's owners) and each
  // token block's list of kept tiles (dE's owners).
  {
    unsigned char* work = scratch.get<unsigned char>("work buffer");  // free between forward and correction
    int* key = reinterpret_cast<int*>(work);
    int* token = key + p.n;
    void* temp = token + p.n;
    int* sorted = scratch.get<int>("targets sorted by position: positions, tokens [2][N], tile offsets [tiles+1]");
    float* coefficient = scratch.get<float>("target coefficient [N]");
    s08::target_coefficients(p, s08::tile_grid(p), inputs, flags, coefficient, stream);
    target_key_kernel<<<blocks_for(p.n), kThreads, 0, stream>>>(coefficient, forward.target_position, p.n,
                                                                plan.tiles * plan.tile_cols, key, token);
    CCE_CHECK_LAUNCH();
    size_t temp_bytes = radix_sort_pairs_temp_bytes<int>(p.n, false);
    CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, key, sorted, token, sorted + p.n,
                                                   static_cast<int>(p.n), 0, key_bits_for(plan.tiles * plan.tile_cols),
                                                   stream));
    tile_target_offsets_kernel<<<blocks_for(plan.tiles + 1), kThreads, 0, stream>>>(sorted, p.n, plan.tiles,
                                                                                   plan.tile_cols, sorted + 2 * p.n);
    CCE_CHECK_LAUNCH();
    fill_block_lists_kernel<<<static_cast<unsigned>(plan.token_blocks), kThreads, 0, stream>>>(
        flags, plan.tiles, plan.token_blocks, scratch.get<int>("kept tiles of each token block [token blocks][1+tiles]"));
    CCE_CHECK_LAUNCH();
  }
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  kept.offsets.assign(host_counts.size() + 1, 0);
  for (size_t t = 0; t < host_counts.size(); ++t) {
    kept.offsets[t + 1] = kept.offsets[t] + host_counts[t];
    if (host_counts[t] > 0) kept.tiles_with_slots.push_back(static_cast<int>(t));
  }
  CCE_CUDA_CHECK(cudaMemcpyAsync(offsets, kept.offsets.data(), kept.offsets.size() * 4, cudaMemcpyHostToDevice,
                                 stream));
  if (!kept.tiles_with_slots.empty())
    CCE_CUDA_CHECK(cudaMemcpyAsync(tiles_with_slots, kept.tiles_with_slots.data(), kept.tiles_with_slots.size() * 4,
                                   cudaMemcpyHostToDevice, stream));
  kept.block_lists.resize(static_cast<size_t>(plan.token_blocks * (plan.tiles + 1)));
  CCE_CUDA_CHECK(cudaMemcpyAsync(kept.block_lists.data(),
                                 scratch.get<int>("kept tiles of each token block [token blocks][1+tiles]"),
                                 kept.block_lists.size() * 4, cudaMemcpyDeviceToHost, stream));
  int* slots = scratch.get<int>("slots: token block, tile, slot of pair [3][pairs]");
  const int64_t pairs = plan.tiles * plan.token_blocks;
  fill_slots_kernel<<<blocks_for(plan.tiles * 32), kThreads, 0, stream>>>(flags, offsets, plan.tiles, plan.token_blocks,
                                                                     slots, slots + pairs, slots + 2 * pairs);
  CCE_CHECK_LAUNCH();
  // The host vectors must outlive the copies: wait for them.
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return kept;
}

namespace {
template <class F>
void dispatch_recompute_kernel(const Problem& p, F&& f) {
  dispatch_block_path(choose_block_path(p), [&](auto tile, auto element, auto aligned) {
    using Tile = decltype(tile);
    auto kernel = recompute_kept_kernel<Tile, decltype(element), decltype(aligned)::value>;
    const size_t shared = Tile::kSharedBytes + RowGradientInputs<Tile>::kSharedBytes;
    CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    f(tile, element, kernel, shared);
  });
}
}  // namespace

int64_t recompute_resident_blocks(const Problem& p) {
  int blocks = 0;
  dispatch_recompute_kernel(p, [&](auto tile, auto, auto kernel, size_t shared) {
    CCE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, decltype(tile)::kThreads, shared));
  });
  return std::max(1, blocks) * int64_t{multiprocessor_count()};
}

void recompute_kept_tiles(const DeviceInputs& in, const DropPlan& plan, const Scratch& scratch, const float* lse,
                          const std::vector<int>& runs, int64_t first_slot, const SlotSpace& space,
                          cudaStream_t stream) {
  const Problem& p = in.problem;
  const int64_t count = static_cast<int64_t>(runs.size()) / 4;
  if (count == 0) return;
  int* device_runs = scratch.get<int>("recompute runs [slots]");
  // From pageable memory: the copy has read `runs` when it returns.
  CCE_CUDA_CHECK(cudaMemcpyAsync(device_runs, runs.data(), runs.size() * 4, cudaMemcpyHostToDevice, stream));
  const int* slot_arrays = scratch.get<int>("slots: token block, tile, slot of pair [3][pairs]");
  const int64_t pairs = plan.tiles * plan.token_blocks;
  dispatch_recompute_kernel(p, [&](auto tile, auto element, auto kernel, size_t shared) {
    using T = decltype(element);
    kernel<<<static_cast<unsigned>(count), decltype(tile)::kThreads, shared, stream>>>(
        reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()),
        scratch.get<int64_t>("target position [N]"), lse, scratch.get<float>("per-token grad scale [N]"), p.n, p.d,
        p.v, p.softcap, scratch.get<int>("vocabulary order [V]"),
        scratch.get<int>("token order, each token's place in it [2][N]"), slot_arrays + 2 * pairs, plan.tiles,
        reinterpret_cast<const int4*>(device_runs), first_slot, space);
    CCE_CHECK_LAUNCH();
  });
}

}  // namespace cce::s10
