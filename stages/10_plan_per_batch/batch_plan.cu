// Stage 10's plan of a batch's backward, from the forward's tile statistics
// before any logit is recomputed: the automatic eps (the largest candidate
// whose tail correction misplaces a softmax mass within a budget) and the token grouping (rows
// sorted by how many tiles they need, in powers of two, then by the rarest tile they need).

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "common/check.h"
#include "common/dependent_launch.cuh"
#include "common/device_math.cuh"
#include "common/radix_sort.cuh"
#include "common/sort_pairs.h"
#include "stages/08_drop_before_recompute/tile_stats.cuh"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce::s10 {
namespace {

using s08::in_tile;
using s08::stats_max;
using s08::stats_sum;

constexpr int kThreads = 256;
unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// misplaced_mass_kernel's grid: x token blocks, y groups of kMassTiles tiles
// (at most 65535, each block looping over groups y, y + gridDim.y, ...).
// A group, not one tile: a block loads its rows' values once for all of them
// and has kMassTiles gathered loads in flight, and the sums take one atomic
// per candidate and block instead of one per pair. Token blocks along x: the
// blocks dispatched together share their tiles, whose statistics, read at the
// grouped rows' scattered places, then come from DRAM once and from L2 after.
constexpr int kMassTiles = 16;
dim3 pair_grid(const s09::DropPlan& plan) {
  return dim3(static_cast<unsigned>(plan.token_blocks),
              static_cast<unsigned>(std::min<int64_t>((plan.tiles + kMassTiles - 1) / kMassTiles, 65535)));
}

// The automatic eps's measure: for each (token block, tile), the largest
// candidate k at which the pair would be dropped (its rows' largest
// m_iT − LSE_i below log_eps[k], stage 08's decision's test) and the mass its
// tail correction leaves misplaced. A dropped row spreads its tile's mass
// M_iT = s_iT·exp(m_iT − LSE_i) (the target's own entry left out: it is exact)
// evenly over the tile's |T| entries; what that moves to the wrong entries is
// at most M_iT·(1 − M_iT/(|T|·p_max)), p_max = exp(m_iT − LSE_i): 0 for a flat
// tile, M_iT for one entry holding it all. misplaced[k] sums these bounds over
// the pairs whose largest such candidate is k, each pair's in
// fixed point (2^-32), so that the sum and the eps chosen from it do not depend
// on the order of the additions; misplaced[kAutoCandidates] counts the rows
// with a gradient. A block per (token block, kMassTiles tiles), a thread per
// row. The pair's largest such k, as k + 1 (0: none),
// goes to its flag [tile][token block], so that the decision at the chosen eps
// needs no second pass over the statistics (keep_pairs_within_budget).
constexpr double kMassUnit = 4294967296.0;  // 2^32
struct LogEps {
  float at[kAutoCandidates];
};
__global__ void misplaced_mass_kernel(const uint32_t* __restrict__ stats, const float* __restrict__ lse,
                                      const float* __restrict__ grad_scale, const float* __restrict__ target_logit,
                                      const int64_t* __restrict__ position, const int* __restrict__ token_order,
                                      int64_t n, int64_t v, int64_t tiles, int64_t token_blocks, int64_t tile_cols,
                                      LogEps log_eps, unsigned long long* __restrict__ misplaced,
                                      uint8_t* __restrict__ drop_candidate) {
  wait_for_kernel_ahead();
  __shared__ float warp_max[kMassTiles][32], warp_misplaced[kMassTiles][32];
  __shared__ int warp_rows[32];
  __shared__ unsigned long long block_misplaced[kAutoCandidates];
  const int64_t b = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (threadIdx.x < kAutoCandidates) block_misplaced[threadIdx.x] = 0;
  const int64_t place = b * blockDim.x + threadIdx.x;
  const int64_t row = place >= n ? n : token_order != nullptr ? token_order[place] : place;
  const bool with_gradient = row < n && grad_scale[row] != 0.0f;
  const float row_lse = with_gradient ? lse[row] : 0.0f;
  const int64_t target_position = with_gradient ? position[row] : -1;
  const float target_p = with_gradient ? __expf(target_logit[row] - row_lse) : 0.0f;
  for (int64_t tile0 = static_cast<int64_t>(blockIdx.y) * kMassTiles; tile0 < tiles;
       tile0 += static_cast<int64_t>(gridDim.y) * kMassTiles) {
    const int group = static_cast<int>(tiles - tile0 < kMassTiles ? tiles - tile0 : kMassTiles);
    uint32_t packed[kMassTiles];
#pragma unroll
    for (int t = 0; t < kMassTiles; ++t) packed[t] = with_gradient && t < group ? stats[(tile0 + t) * n + row] : 0u;
#pragma unroll
    for (int t = 0; t < kMassTiles; ++t) {
      float log_p = -INFINITY, row_misplaced = 0.0f;
      if (with_gradient) {
        log_p = stats_max(packed[t]) - row_lse;
        const float p_max = __expf(log_p);
        float row_mass = stats_sum(packed[t]) * p_max;
        if (in_tile(target_position, tile0 + t, tile_cols)) row_mass -= target_p;
        row_mass = fmaxf(row_mass, 0.0f);
        const int64_t first_col = (tile0 + t) * tile_cols;
        const float width = static_cast<float>(v - first_col < tile_cols ? v - first_col : tile_cols);
        row_misplaced = misplaced_mass_bound(row_mass, width, p_max);
      }
      for (int offset = 16; offset > 0; offset /= 2) {  // a fixed order: the same sum every run
        log_p = fmaxf(log_p, __shfl_xor_sync(0xffffffffu, log_p, offset));
        row_misplaced += __shfl_xor_sync(0xffffffffu, row_misplaced, offset);
      }
      if (lane == 0) warp_max[t][warp] = log_p, warp_misplaced[t][warp] = row_misplaced;
    }
    __syncthreads();
    if (threadIdx.x < group) {  // a thread per tile of the group
      const int t = threadIdx.x;
      float largest = -INFINITY, pair_misplaced = 0.0f;
      for (int w = 0; w < warps; ++w) largest = fmaxf(largest, warp_max[t][w]), pair_misplaced += warp_misplaced[t][w];
      int k = kAutoCandidates - 1;  // the largest k whose test drops the pair
      while (k >= 0 && !(largest < log_eps.at[k])) --k;
      drop_candidate[(tile0 + t) * token_blocks + b] = static_cast<uint8_t>(k + 1);
      if (k >= 0 && pair_misplaced > 0.0f)  // integers: the block's sum is the same in any order
        atomicAdd(block_misplaced + k,
                  static_cast<unsigned long long>(llrint(static_cast<double>(pair_misplaced) * kMassUnit)));
    }
    __syncthreads();
  }
  if (blockIdx.y == 0) {  // the rows with a gradient, counted once: by the blocks of the first group
    int rows = with_gradient ? 1 : 0;
    for (int offset = 16; offset > 0; offset /= 2) rows += __shfl_xor_sync(0xffffffffu, rows, offset);
    if (lane == 0) warp_rows[warp] = rows;
    __syncthreads();
    if (threadIdx.x == 0) {
      int block_rows = 0;
      for (int w = 0; w < warps; ++w) block_rows += warp_rows[w];
      if (block_rows > 0) atomicAdd(misplaced + kAutoCandidates, static_cast<unsigned long long>(block_rows));
    }
  }
  __syncthreads();
  if (threadIdx.x < kAutoCandidates && block_misplaced[threadIdx.x] != 0)
    atomicAdd(misplaced + threadIdx.x, block_misplaced[threadIdx.x]);
}

// Token grouping: a token block keeps a tile when any of its rows needs it,
// so each block should hold rows that need the same tiles. Rows are sorted
// by how many tiles they need, in powers of two (most first: a flat row's
// block keeps nearly all tiles whoever shares it), then by the rarest tile
// they need (a tile few rows need costs least when those rows share a
// block), then by the count itself. A row needs tile T when
// m_iT − LSE_i ≥ the threshold (grouping_log_threshold); rows_hot[T] counts the rows with a
// gradient that need it, rank[T] is T's place in the tiles sorted by
// (rows_hot, T). Row i's key, from the most significant: buckets − 1 −
// ⌊log2(count_i + 1)⌋, rarest_i (the smallest rank of a tile it needs;
// tiles: none), tiles − count_i; rows without a gradient last (count 0,
// rarest = tiles, tiles + 1 for the last). Integers: the same order every run.
int grouping_buckets(int64_t tiles) {  // ⌊log2(count + 1)⌋ for counts 0 … tiles
  int buckets = 1;
  while ((int64_t{1} << buckets) <= tiles + 1) ++buckets;
  return buckets;
}
__device__ __forceinline__ bool needs_tile(uint32_t stats, float row_lse, float log_threshold) {
  return stats_max(stats) - row_lse >= log_threshold;
}
// key[i] = tiles (tiles + 1 without a gradient), grouping_key[i] = INT_MAX, rows_hot = 0.
__global__ void token_key_kernel(const float* __restrict__ grad_scale, int64_t n, int64_t tiles,
                                 int* __restrict__ key, int* __restrict__ token, int* __restrict__ grouping_key,
                                 int* __restrict__ rows_hot) {
  wait_for_kernel_ahead();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < tiles) rows_hot[i] = 0;
  if (i >= n) return;
  key[i] = grad_scale[i] != 0.0f ? static_cast<int>(tiles) : static_cast<int>(tiles) + 1;
  token[i] = static_cast<int>(i);
  grouping_key[i] = INT_MAX;
}
// key[i] −= the row's count over kTilesPerCount tiles (grid.y), each tile's
// rows_hot += its rows that need it (a warp's ballot into the block's
// counts, then one atomic per block and tile): integer sums, the same in any
// order; and need_bits[y][i] holds which of the group's tiles row i needs,
// so that the rarest tile's pass reads 16 bits instead of 16 statistics.
// Many blocks: a thread per row over every tile would wait on 2000
// dependent loads at gemma2.
constexpr int kTilesPerCount = 16;
__global__ void token_count_kernel(const uint32_t* __restrict__ stats, const float* __restrict__ lse,
                                   const float* __restrict__ grad_scale, int64_t n, int64_t tiles, float given_threshold,
                                   const float* __restrict__ chosen_threshold, int* __restrict__ key,
                                   int* __restrict__ rows_hot, uint16_t* __restrict__ need_bits) {
  wait_for_kernel_ahead();
  const float log_threshold = chosen_threshold != nullptr ? *chosen_threshold : given_threshold;
  __shared__ int block_rows[kTilesPerCount];
  if (threadIdx.x < kTilesPerCount) block_rows[threadIdx.x] = 0;
  __syncthreads();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool counted = i < n && grad_scale[i] != 0.0f;  // every lane stays for the ballots
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kTilesPerCount;
  const int group = static_cast<int>(tiles - first < kTilesPerCount ? tiles - first : kTilesPerCount);
  const float row_lse = counted ? lse[i] : 0.0f;
  uint32_t packed[kTilesPerCount];  // all loads first, then the tests
#pragma unroll
  for (int t = 0; t < kTilesPerCount; ++t) packed[t] = counted && t < group ? stats[(first + t) * n + i] : 0u;
  unsigned needs = 0;
#pragma unroll
  for (int t = 0; t < kTilesPerCount; ++t) {
    const bool needed = counted && t < group && needs_tile(packed[t], row_lse, log_threshold);
    needs |= needed ? 1u << t : 0u;
    const unsigned rows = __ballot_sync(0xffffffffu, needed);
    if (threadIdx.x % 32 == 0 && rows != 0) atomicAdd(block_rows + t, __popc(rows));
  }
  if (i < n) need_bits[blockIdx.y * n + i] = static_cast<uint16_t>(needs);
  if (needs != 0) atomicSub(key + i, __popc(needs));
  __syncthreads();
  if (threadIdx.x < group && block_rows[threadIdx.x] != 0) atomicAdd(rows_hot + first + threadIdx.x, block_rows[threadIdx.x]);
}
// rank[T] = how many tiles come before T in the order (rows_hot, T): a block
// per tile, its threads over the tiles in strides, then summed.
__global__ void tile_rank_kernel(const int* __restrict__ rows_hot, int64_t tiles, int* __restrict__ rank) {
  wait_for_kernel_ahead();
  __shared__ int warp_before[kThreads / 32];
  const int64_t t = blockIdx.x;
  const int mine = rows_hot[t];
  int before = 0;
  for (int64_t u = threadIdx.x; u < tiles; u += blockDim.x) {
    const int other = rows_hot[u];
    before += other < mine || (other == mine && u < t) ? 1 : 0;
  }
  for (int offset = 16; offset > 0; offset /= 2) before += __shfl_xor_sync(0xffffffffu, before, offset);
  if (threadIdx.x % 32 == 0) warp_before[threadIdx.x / 32] = before;
  __syncthreads();
  if (threadIdx.x == 0) {
    int sum = 0;
    for (int w = 0; w < kThreads / 32; ++w) sum += warp_before[w];
    rank[t] = sum;
  }
}
// grouping_key[i] = the key above with rarest_i the smallest rank of the
// row's needed tiles among kTilesPerCount (grid.y), by atomicMin; the first
// group's thread also offers rarest = tiles, so that a row that needs no
// tile, and a row without a gradient, gets its key too.
__global__ void token_rarest_kernel(const uint16_t* __restrict__ need_bits, const int* __restrict__ rank, int64_t n,
                                    int64_t tiles, int buckets, const int* __restrict__ key,
                                    int* __restrict__ grouping_key) {
  wait_for_kernel_ahead();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned needs = need_bits[blockIdx.y * n + i];
  if (needs == 0 && blockIdx.y != 0) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kTilesPerCount;
  int rarest = static_cast<int>(tiles);
  for (; needs != 0; needs &= needs - 1) rarest = min(rarest, rank[first + __ffs(needs) - 1]);
  const int count = max(static_cast<int>(tiles) - key[i], 0);
  const int bucket = 31 - __clz(count + 1);  // ⌊log2(count + 1)⌋
  const int leading = (buckets - 1 - bucket) * static_cast<int>(tiles + 1) + rarest;
  atomicMin(grouping_key + i, leading * static_cast<int>(tiles + 2) + key[i]);
}
__global__ void token_place_kernel(const int* __restrict__ token_order, int64_t n, int* __restrict__ token_place) {
  wait_for_kernel_ahead();
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n) token_place[token_order[k]] = static_cast<int>(k);
}
// out[r] = rows[order[r]], a block per row, in pieces of 16, 4 or 2 bytes.
template <typename Piece>
__global__ void rows_by_index_kernel(const Piece* __restrict__ rows, const int* __restrict__ order, int64_t pieces,
                                     Piece* __restrict__ out) {
  const Piece* from = rows + static_cast<int64_t>(order[blockIdx.x]) * pieces;
  Piece* to = out + static_cast<int64_t>(blockIdx.x) * pieces;
  for (int64_t x = threadIdx.x; x < pieces; x += blockDim.x) to[x] = from[x];
}

}  // namespace

namespace {
constexpr const char* kGroupingItem =
    "token grouping: each row's key, the rows per tile, the tiles' ranks, the regrouping's threshold [N + 2·tiles + 1]";
constexpr const char* kNeedBitsItem =
    "token grouping: the tiles each row needs [tiles/16][N] (16 bits; where the work buffer cannot hold them)";
int64_t grouping_tiles(const Problem& p) {
  const int64_t tile_cols = s08::backward_tile(p.dtype);
  return (p.v + tile_cols - 1) / tile_cols;
}
int64_t grouping_tile_groups(int64_t tiles) { return (tiles + kTilesPerCount - 1) / kTilesPerCount; }
size_t need_bits_bytes(const Problem& p) {
  return static_cast<size_t>(grouping_tile_groups(grouping_tiles(p)) * p.n) * sizeof(uint16_t);
}
// The grouping's sort takes the work buffer's first bytes (its keys, tokens,
// sorted keys [3][N], then the sort's temporaries), the bytes s09 reserves
// there for its target sort; the need bits follow.
size_t need_bits_offset(const Problem& p) { return (s09::target_sort_work_bytes(p.n) + 255) / 256 * 256; }
constexpr const char* kMisplacedMassItem = "misplaced mass per eps, rows with a gradient, the dense head's length [candidates + 2]";
}  // namespace

bool need_bits_in_work(const Problem& p, const DropPlan& plan) {
  return need_bits_offset(p) + need_bits_bytes(p) <= plan.work_bytes;
}

std::vector<MemoryItem> batch_plan_items(const Problem& p, const DropPlan& plan) {
  std::vector<MemoryItem> items = {{"token order, each token's place in it [2][N]", static_cast<size_t>(p.n) * 8},
                                   {kGroupingItem, static_cast<size_t>(p.n + 2 * grouping_tiles(p) + 1) * 4},
                                   {kMisplacedMassItem, (kAutoCandidates + 2) * 8}};
  if (!need_bits_in_work(p, plan)) items.push_back({kNeedBitsItem, need_bits_bytes(p)});
  return items;
}

DropPlan plan_with_rows_in_de(DropPlan plan) {
  plan.spill_slot_capacity = 0;
  return plan;
}

bool rows_copy_pays(const DropPlan& plan, int64_t kept) {
  if (kept <= plan.chunk_slots()) return false;  // one chunk with the dE output's slots: no copy
  // Without them at most twice the chunks: each chunk ends dE's parts with a pass over their fp32 sums.
  return 2 * plan_with_rows_in_de(plan).chunk_slots() >= plan.chunk_slots();
}

bool copies_rows_in_token_order(const Problem& p, const DropPlan& plan, int64_t kept, const s08::TokenBlocks& blocks,
                                const void* de, const void* dc) {
  if (blocks.token_order == nullptr || de == nullptr || dc == nullptr || !s09::dc_rows_by_tma(p)) return false;
  return rows_copy_pays(plan, kept);
}

void copy_rows_by_index(const Problem& p, const void* rows, const int* order, int64_t count, void* out,
                        cudaStream_t stream) {
  const auto row_bytes = static_cast<size_t>(p.d) * p.element_bytes();
  // The widest piece that divides a row and both addresses.
  const auto fits = [&](size_t piece) {
    return row_bytes % piece == 0 && reinterpret_cast<uintptr_t>(rows) % piece == 0 &&
           reinterpret_cast<uintptr_t>(out) % piece == 0;
  };
  constexpr unsigned kRowThreads = 128;
  const auto blocks = static_cast<unsigned>(count);
  if (fits(16))
    rows_by_index_kernel<<<blocks, kRowThreads, 0, stream>>>(static_cast<const uint4*>(rows), order, row_bytes / 16,
                                                             static_cast<uint4*>(out));
  else if (fits(4))
    rows_by_index_kernel<<<blocks, kRowThreads, 0, stream>>>(static_cast<const uint32_t*>(rows), order, row_bytes / 4,
                                                             static_cast<uint32_t*>(out));
  else
    rows_by_index_kernel<<<blocks, kRowThreads, 0, stream>>>(static_cast<const uint16_t*>(rows), order, row_bytes / 2,
                                                             static_cast<uint16_t*>(out));
  CCE_CHECK_LAUNCH();
}

const void* copy_rows_in_token_order(const DeviceInputs& in, const s08::TokenBlocks& blocks, void* de,
                                     cudaStream_t stream) {
  copy_rows_by_index(in.problem, in.e.get(), blocks.token_order, in.problem.n, de, stream);
  return de;
}

BatchPlanBuffers batch_plan_buffers(const Problem& p, const Scratch& scratch) {
  BatchPlanBuffers b;
  b.token_order = scratch.get<int>("token order, each token's place in it [2][N]");
  b.token_place = b.token_order + p.n;
  b.grouping_key = scratch.get<int>(kGroupingItem);
  b.rows_hot = b.grouping_key + p.n;
  b.tile_rank = b.rows_hot + grouping_tiles(p);
  b.regroup_threshold = reinterpret_cast<float*>(b.tile_rank + grouping_tiles(p));
  if (scratch.has(kNeedBitsItem)) b.need_bits = scratch.get<uint16_t>(kNeedBitsItem);
  b.misplaced_mass = scratch.get<unsigned long long>(kMisplacedMassItem);
  b.head_tiles = reinterpret_cast<int*>(b.misplaced_mass + kAutoCandidates + 1);  // in the last 8 bytes
  return b;
}

namespace {
// The grouping with needs tested at log_threshold, or at *chosen_threshold
// (on the device) when given.
s08::TokenBlocks group_tokens_at(const Problem& p, const s09::DropPlan& plan, const BatchPlanBuffers& buffers,
                                 const s09::BackwardBuffers& backward, const float* lse, float log_threshold,
                                 const float* chosen_threshold, cudaStream_t stream) {
  const int buckets = grouping_buckets(plan.tiles);
  const int64_t largest_key = buckets * (plan.tiles + 1) * (plan.tiles + 2) - 1;
  if (largest_key > INT_MAX)
    throw InputError("stage 10's token grouping packs its sort key in an int: V = " + std::to_string(p.v) + " makes " +
                     std::to_string(plan.tiles) + " vocabulary tiles, too many (pass --no-token-grouping)");
  unsigned char* work = backward.forward.work;  // free between the forward and the correction
  int* key = reinterpret_cast<int*>(work);
  int* token = key + p.n;
  int* sorted_key = token + p.n;
  void* temp = sorted_key + p.n;
  uint16_t* need_bits = need_bits_in_work(p, plan) ? reinterpret_cast<uint16_t*>(work + need_bits_offset(p)) : buffers.need_bits;
  if (need_bits == nullptr) throw CudaError("stage 10: the need bits' item was not allocated (a stage bug)");
  const float* grad_scale = backward.grad_scale;
  launch_dependent(token_key_kernel, blocks_for(std::max(p.n, plan.tiles)), kThreads, stream, grad_scale, p.n,
                   plan.tiles, key, token, buffers.grouping_key, buffers.rows_hot);
  const dim3 rows_by_tile_groups(blocks_for(p.n), static_cast<unsigned>(grouping_tile_groups(plan.tiles)));
  launch_dependent(token_count_kernel, rows_by_tile_groups, kThreads, stream, backward.forward.kept.stats, lse,
                   grad_scale, p.n, plan.tiles, log_threshold, chosen_threshold, key, buffers.rows_hot, need_bits);
  launch_dependent(tile_rank_kernel, static_cast<unsigned>(plan.tiles), kThreads, stream, buffers.rows_hot, plan.tiles,
                   buffers.tile_rank);
  launch_dependent(token_rarest_kernel, rows_by_tile_groups, kThreads, stream, need_bits, buffers.tile_rank,
                   p.n, plan.tiles, buckets, key, buffers.grouping_key);
  size_t temp_bytes = radix_sort_pairs_temp_bytes<int>(p.n, false);
  sort_int_pairs(temp, temp_bytes, buffers.grouping_key, sorted_key, token, buffers.token_order, p.n,
                 radix_key_bits(largest_key), stream);
  launch_dependent(token_place_kernel, blocks_for(p.n), kThreads, stream, buffers.token_order, p.n,
                   buffers.token_place);
  return s08::TokenBlocks{buffers.token_order, buffers.token_place};
}
}  // namespace

s08::TokenBlocks group_tokens(const Problem& p, const s09::DropPlan& plan, const BatchPlanBuffers& buffers,
                              const s09::BackwardBuffers& backward, const float* lse, float log_threshold,
                              cudaStream_t stream) {
  return group_tokens_at(p, plan, buffers, backward, lse, log_threshold, nullptr, stream);
}

namespace {
// The choice, on the host (the report) and on the device (the decision, with
// no read-back): the same IEEE double arithmetic, so the same candidate.
__host__ __device__ int first_within_budget(const double* misplaced, double budget) {
  for (int k = 0; k < kAutoCandidates; ++k)
    if (misplaced[k] <= budget) return k;
  return kAutoCandidates - 1;  // the smallest candidate
}
// misplaced[k]: the misplaced mass per row at candidate k (a pair dropped at k
// is dropped at every larger eps too, so the sums add up from the smallest eps).
__host__ __device__ void misplaced_per_row(const unsigned long long* sums, unsigned long long rows_with_gradient,
                                           double* misplaced) {
  const double rows = static_cast<double>(rows_with_gradient > 0 ? rows_with_gradient : 1);
  unsigned long long above = 0;
  for (int k = kAutoCandidates - 1; k >= 0; --k)
    above += sums[k], misplaced[k] = static_cast<double>(above) / kMassUnit / rows;
}
// The candidate the device chooses from measure_misplaced_mass's buffer (the
// masses, then the rows with a gradient).
__device__ int chosen_candidate(const unsigned long long* measured, double budget) {
  double misplaced[kAutoCandidates];
  misplaced_per_row(measured, measured[kAutoCandidates], misplaced);
  return first_within_budget(misplaced, budget);
}
// ln of each candidate eps, for the kernels that test against them.
LogEps candidate_log_eps() {
  LogEps log_eps{};
  for (int k = 0; k < kAutoCandidates; ++k) log_eps.at[k] = std::log(candidate_eps(k));
  return log_eps;
}
}  // namespace

int choose_drop_candidate(const double (&misplaced)[kAutoCandidates], double budget) {
  return first_within_budget(misplaced, budget);
}

// The statistics' misplaced mass at each candidate (one pass over them).
void measure_misplaced_mass(const Problem& p, const s09::DropPlan& plan, const BatchPlanBuffers& buffers,
                            const s09::BackwardBuffers& backward, const float* lse, const s08::TokenBlocks& blocks,
                            cudaStream_t stream) {
  static_assert(kAutoCandidates <= 64, "the kernel zeroes and adds its bins a thread each: blocks of tile_rows >= 64");
  const LogEps log_eps = candidate_log_eps();
  unsigned long long* mass = buffers.misplaced_mass;
  CCE_CUDA_CHECK(cudaMemsetAsync(mass, 0, (kAutoCandidates + 1) * 8, stream));
  const s08::TileStatistics& forward = backward.forward.kept;
  launch_dependent(misplaced_mass_kernel, pair_grid(plan), static_cast<unsigned>(plan.tile_rows), stream,
      forward.stats, lse, backward.grad_scale, forward.target_logit, forward.target_position,
      blocks.token_order, p.n, p.v, plan.tiles, plan.token_blocks, plan.tile_cols, log_eps, mass, backward.keep);
}

namespace {
// The eps the first grouping's masses choose, as a threshold kRegroupExponents
// below it (ln eps_k − kRegroupExponents·ln 2), for the second grouping.
__global__ void regroup_threshold_kernel(const unsigned long long* __restrict__ mass, double budget, LogEps log_eps,
                                         float* __restrict__ threshold) {
  wait_for_kernel_ahead();
  *threshold = near_eps_log_threshold(log_eps.at[chosen_candidate(mass, budget)]);
}
}  // namespace

void regroup_near_chosen_eps(const Problem& p, const s09::DropPlan& plan, const BatchPlanBuffers& buffers,
                             const s09::BackwardBuffers& backward, const float* lse, double budget,
                             s08::TokenBlocks& blocks, cudaStream_t stream) {
  launch_dependent(regroup_threshold_kernel, 1, 1, stream, static_cast<const unsigned long long*>(buffers.misplaced_mass),
                   budget, candidate_log_eps(), buffers.regroup_threshold);
  blocks = group_tokens_at(p, plan, buffers, backward, lse, 0.0f, buffers.regroup_threshold, stream);
  measure_misplaced_mass(p, plan, buffers, backward, lse, blocks, stream);
}

namespace {
// The candidate within the budget (first_within_budget, the host's arithmetic),
// then flag = 1 when the pair is kept at it (its largest dropping candidate,
// stored + 1, is below it), and the tile's count of kept pairs: a block per
// tile, an integer sum. Block 0 also writes the masses into the host's
// page-locked memory (with unified addressing the device writes it directly),
// so that the host's report needs no copy of its own.
__global__ void keep_within_budget_kernel(const unsigned long long* __restrict__ measured, double budget,
                                          uint8_t* __restrict__ flags, int64_t token_blocks,
                                          int* __restrict__ kept_per_tile, unsigned long long* __restrict__ on_host) {
  wait_for_kernel_ahead();
  __shared__ int chosen, count;
  if (threadIdx.x == 0) chosen = chosen_candidate(measured, budget), count = 0;
  if (blockIdx.x == 0 && threadIdx.x <= kAutoCandidates) on_host[threadIdx.x] = measured[threadIdx.x];
  __syncthreads();
  int kept = 0;
  for (int64_t b = threadIdx.x; b < token_blocks; b += blockDim.x) {
    uint8_t& flag = flags[blockIdx.x * token_blocks + b];
    const bool keep = flag <= chosen;  // dropped at every candidate up to flag − 1
    flag = keep ? 1 : 0;
    kept += keep;
  }
  if (kept > 0) atomicAdd(&count, kept);
  __syncthreads();
  if (threadIdx.x == 0) kept_per_tile[blockIdx.x] = count;
}
}  // namespace

PendingEps keep_pairs_within_budget(const DropPlan& plan, const s09::BackwardBuffers& backward,
                                    const BatchPlanBuffers& buffers, double budget, HostTables& host,
                                    cudaStream_t stream) {
  PendingEps pending;
  pending.budget = budget;
  pending.measured = {host.read_back.take<unsigned long long>(kAutoCandidates + 1), kAutoCandidates + 1};
  static_assert(kAutoCandidates + 1 <= kThreads, "a thread per mass");
  if (plan.tiles == 0) {  // no block to write them: the masses by a copy
    CCE_CUDA_CHECK(cudaMemcpyAsync(pending.measured.data(), buffers.misplaced_mass, pending.measured.size() * 8,
                                   cudaMemcpyDeviceToHost, stream));
    return pending;
  }
  launch_dependent(keep_within_budget_kernel, static_cast<unsigned>(plan.tiles), kThreads, stream,
                   static_cast<const unsigned long long*>(buffers.misplaced_mass), budget, backward.keep,
                   plan.token_blocks, backward.kept_counts, pending.measured.data());
  return pending;
}

// The largest eps within the budget.
EpsChoice choose_drop_eps(const MisplacedMass& measured, double budget) {
  double misplaced[kAutoCandidates];
  misplaced_per_row(measured.mass.data(), measured.rows, misplaced);
  const int chosen = first_within_budget(misplaced, budget);
  EpsChoice choice;
  choice.eps = candidate_eps(chosen);
  choice.misplaced_mass = misplaced[chosen];
  std::copy(misplaced, misplaced + kAutoCandidates, choice.candidates.begin());
  return choice;
}

EpsChoice PendingEps::chosen() const {
  MisplacedMass read;
  std::copy(measured.begin(), measured.begin() + kAutoCandidates, read.mass.begin());
  read.rows = measured[kAutoCandidates];
  return choose_drop_eps(read, budget);
}

}  // namespace cce::s10
