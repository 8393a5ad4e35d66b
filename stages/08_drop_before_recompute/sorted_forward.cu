// Stage 08's forward when a backward follows: sort the vocabulary by its
// average logit before computing any tile, then run the fused forward over
// the sorted vocabulary, chunk by chunk, keeping each (row, tile)'s
// statistics (tile_stats.cuh). Deterministic: every reduction runs in a
// fixed order (each row's ranges are merged in one fixed tree).
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/check.h"
#include "common/dependent_launch.cuh"
#include "common/device_math.cuh"
#include "common/radix_sort.cuh"
#include "common/tile/launch.cuh"
#include "common/token_reduction.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"
#include "stages/08_drop_before_recompute/tile_stats.cuh"

namespace cce::s08 {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSumRows = 256;      // rows per partial column sum of E
constexpr int64_t kMaxRanges = 64;     // the forward's ranges per chunk (64·N·8 bytes of partials): balanced waves (WORKLOG)
constexpr int64_t kChunkMultiple = 256;  // the forward's chunks: whole tiles of every product

unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// Partial column sums of the valid rows of E: partial[chunk][k] = Σ_{rows of the chunk, t_i valid} E_ik.
// A block is 32 column lanes × 32 row lanes (row lane y takes rows y, y + 32, ...), so
// that a chunk's 256 rows are read by 32 warps at once; the lanes are then
// added in a fixed order. A column lane takes kWidth neighbouring columns with
// one 8-byte load where E's rows allow it (kWidth = 1 otherwise).
constexpr int kSumColumns = 32, kSumLanes = 32;
template <typename T, int kWidth>
__global__ void __launch_bounds__(kSumColumns* kSumLanes)
    valid_row_partial_sums_kernel(const T* __restrict__ e, const int64_t* __restrict__ targets, int64_t n, int64_t d,
                                  int64_t ignore_index, float* __restrict__ partial) {
  using Piece = std::conditional_t<kWidth == 1, T, uint2>;
  static_assert(sizeof(Piece) == kWidth * sizeof(T), "a piece is kWidth elements");
  __shared__ float lanes[kSumLanes][kSumColumns * kWidth];
  const int64_t k = (static_cast<int64_t>(blockIdx.x) * kSumColumns + threadIdx.x) * kWidth, chunk = blockIdx.y;
  float sum[kWidth] = {};
  const int64_t end = n < (chunk + 1) * kSumRows ? n : (chunk + 1) * kSumRows;
  // Every row's piece is loaded, the ignored ones' added as 0: no load waits
  // for its row's target, so the unrolled loop keeps several rows in flight.
  if (k < d)
#pragma unroll 4
    for (int64_t i = chunk * kSumRows + threadIdx.y; i < end; i += kSumLanes) {
      const bool valid = targets[i] != ignore_index;
      const Piece piece = *reinterpret_cast<const Piece*>(e + i * d + k);
      const T* x = reinterpret_cast<const T*>(&piece);
#pragma unroll
      for (int u = 0; u < kWidth; ++u) sum[u] += valid ? to_float(x[u]) : 0.0f;
    }
#pragma unroll
  for (int u = 0; u < kWidth; ++u) lanes[threadIdx.y][threadIdx.x * kWidth + u] = sum[u];
  __syncthreads();
  if (threadIdx.y != 0 || k >= d) return;
#pragma unroll
  for (int u = 0; u < kWidth; ++u) {
    for (int y = 1; y < kSumLanes; ++y) sum[u] += lanes[y][threadIdx.x * kWidth + u];
    partial[chunk * d + k + u] = sum[u];
  }
}

__global__ void sum_partials_kernel(const float* __restrict__ partial, int64_t chunks, int64_t d,
                                    float* __restrict__ e_sum) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= d) return;
  float sum = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) sum += partial[c * d + k];
  e_sum[k] = sum;
}

// Every row of a [rows, row_bytes] matrix at base starts on a multiple of bytes.
inline bool rows_in_vectors_of(const void* base, int64_t row_bytes, int bytes) {
  return reinterpret_cast<uintptr_t>(base) % bytes == 0 && row_bytes % bytes == 0;
}

// key_j = C_j · Σ_i E_i: a warp per vocabulary row; N·key_j/#valid is the
// average logit of entry j (without softcap; with it, the same order is used).
// kWide: a lane reads 16 bytes of C and the matching ΣE as float4s, the
// pieces kKeyBatch at a time: their loads in flight together, the sum in the
// same order as one piece after another.
constexpr int kKeyBatch = 4;
template <typename T, bool kWide>
__global__ void sort_key_kernel(const T* __restrict__ c, const float* __restrict__ e_sum, int64_t v, int64_t d,
                                float* __restrict__ key, int* __restrict__ identity) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (j >= v) return;
  float dot = 0.0f;
  if constexpr (kWide) {
    constexpr int kWidth = 16 / sizeof(T), kSums = kWidth / 4;
    const uint4* row = reinterpret_cast<const uint4*>(c + j * d);
    const float4* sums = reinterpret_cast<const float4*>(e_sum);
    const int64_t pieces = d / kWidth;
    for (int64_t q0 = lane; q0 < pieces; q0 += 32 * kKeyBatch) {
      uint4 batch[kKeyBatch];
#pragma unroll
      for (int u = 0; u < kKeyBatch; ++u)
        if (q0 + 32 * u < pieces) batch[u] = row[q0 + 32 * u];
#pragma unroll
      for (int u = 0; u < kKeyBatch; ++u) {
        const int64_t q = q0 + 32 * u;
        if (q >= pieces) break;
        const T* x = reinterpret_cast<const T*>(&batch[u]);
#pragma unroll
        for (int h = 0; h < kSums; ++h) {
          const float4 s = sums[q * kSums + h];
          dot += to_float(x[4 * h]) * s.x + to_float(x[4 * h + 1]) * s.y + to_float(x[4 * h + 2]) * s.z +
                 to_float(x[4 * h + 3]) * s.w;
        }
      }
    }
  } else {
    for (int64_t k = lane; k < d; k += 32) dot += to_float(c[j * d + k]) * e_sum[k];
  }
  dot = warp_reduce_sum(dot);
  if (lane == 0) {
    key[j] = dot;
    identity[j] = static_cast<int>(j);
  }
}

// rank[order[p]] = p, then each token's target as a sorted position.
__global__ void rank_kernel(const int* __restrict__ order, int64_t v, int* __restrict__ rank) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < v) rank[order[p]] = static_cast<int>(p);
}
// The same pass starts each row's state (max −∞, sum 0) and its target logit
// (0: an ignored token keeps it) for the chunks' merges.
__global__ void target_position_kernel(const int64_t* __restrict__ targets, const int* __restrict__ rank, int64_t n,
                                       int64_t v, int64_t ignore_index, int64_t* __restrict__ position,
                                       float2* __restrict__ row_state, float* __restrict__ target_logit) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t t = targets[i];
  position[i] = t != ignore_index && t >= 0 && t < v ? rank[t] : -1;  // −1: ignored
  row_state[i] = make_float2(-INFINITY, 0.0f);
  target_logit[i] = 0.0f;
}

// Rows [first, first + rows) of the sorted vocabulary, a block per backward
// tile of tile_cols rows: out[r] = C[order[first + r]], and the tile's mean
// row C̄_T (the tail correction's) on the way, as the rows pass anyway.
constexpr int kGatherMaxRows = 128;  // tile_cols of every dtype fits
constexpr int kGatherBatch = 16;     // rows whose loads are in flight at once per thread

template <typename T>
__global__ void gather_rows_kernel(const T* __restrict__ c, const int* __restrict__ order, int64_t first,
                                   int64_t rows, int64_t d, int64_t tile_cols, T* __restrict__ out,
                                   T* __restrict__ means) {
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * tile_cols;
  const int count = static_cast<int>(rows - r0 < tile_cols ? rows - r0 : tile_cols);
  T* mean = means + ((first + r0) / tile_cols) * d;
  __shared__ int source[kGatherMaxRows];  // the tile's rows of C, read once per block
  for (int r = threadIdx.x; r < count; r += blockDim.x) source[r] = order[first + r0 + r];
  __syncthreads();
  if ((d * sizeof(T)) % 16 == 0) {
    const int64_t vectors = d / RowMean16<T>::kColumns;
    for (int64_t x = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; x < vectors;
         x += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      RowMean16<T> sum;
      // Loads of a batch of rows first, then their stores and sums in row
      // order (the mean's sum keeps one order: bitwise the same as row by row).
      for (int r = 0; r < count; r += kGatherBatch) {
        uint4 value[kGatherBatch];
#pragma unroll
        for (int u = 0; u < kGatherBatch; ++u)
          if (r + u < count) value[u] = reinterpret_cast<const uint4*>(c + static_cast<int64_t>(source[r + u]) * d)[x];
#pragma unroll
        for (int u = 0; u < kGatherBatch; ++u) {
          if (r + u >= count) break;
          reinterpret_cast<uint4*>(out + (r0 + r + u) * d)[x] = value[u];
          sum.add(value[u]);
        }
      }
      reinterpret_cast<uint4*>(mean)[x] = sum.mean(count);
    }
  } else {
    for (int64_t k = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; k < d;
         k += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      float sum = 0.0f;
      for (int r = 0; r < count; ++r) {
        const T value = c[static_cast<int64_t>(source[r]) * d + k];
        out[(r0 + r) * d + k] = value;
        sum += to_float(value);
      }
      mean[k] = from_float<T>(sum / static_cast<float>(count));
    }
  }
}

// Merges the chunk's ranges into the running (max, sum) of each row. A row
// has kMergeLanes lanes of one warp: lane l merges ranges l, l + kMergeLanes,
// ... in order, the lanes are joined by shuffles at distances 4, 2, 1, and
// lane 0 merges the result into the row's running state. A fixed order (the
// same bits every run), with eight times the loads in flight of a thread per row.
constexpr int kMergeLanes = 8;
__global__ void merge_chunk_kernel(const float2* __restrict__ partial, int64_t n, int64_t ranges,
                                   float2* __restrict__ row_state) {
  wait_for_kernel_ahead();
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t i = thread / kMergeLanes;
  const int lane = static_cast<int>(thread % kMergeLanes);
  OnlineSoftmax state;  // empty; rows past n stay so, and still take part in the shuffles
  if (i < n)
    for (int64_t r = lane; r < ranges; r += kMergeLanes)
      state.merge(OnlineSoftmax{partial[r * n + i].x, partial[r * n + i].y});
  for (int offset = kMergeLanes / 2; offset > 0; offset /= 2)
    state.merge(OnlineSoftmax{__shfl_xor_sync(0xffffffffu, state.max, offset),
                              __shfl_xor_sync(0xffffffffu, state.sum, offset)});
  if (i >= n || lane != 0) return;
  OnlineSoftmax row{row_state[i].x, row_state[i].y};
  row.merge(state);
  row_state[i] = make_float2(row.max, row.sum);
}

__global__ void lse_and_loss_kernel(const float2* __restrict__ row_state, const float* __restrict__ target_logit,
                                    const int64_t* __restrict__ position, int64_t n, float* __restrict__ lse,
                                    float* __restrict__ loss_per_token) {
  wait_for_kernel_ahead();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float row_lse = OnlineSoftmax{row_state[i].x, row_state[i].y}.lse();
  lse[i] = row_lse;
  loss_per_token[i] = position[i] < 0 ? 0.0f : row_lse - target_logit[i];
}

Problem chunk_problem(const Problem& p, int64_t rows) {
  Problem chunk = p;
  chunk.v = rows;
  return chunk;
}

struct ChunkPlan {
  TilePath path;
  TileUnits units;
};
ChunkPlan plan_chunk(const Problem& p, int64_t rows) {
  const Problem chunk = chunk_problem(p, rows);
  ChunkPlan plan;
  plan.path = choose_forward_path(chunk);
  UnitPolicy policy;
  policy.fill_wave = true;
  policy.blocks_per_sm = resident_blocks_per_sm<TileStatsEpilogue>(plan.path);
  policy.max_ranges = kMaxRanges;
  plan.units = plan_tile_units(chunk, plan.path, policy);
  return plan;
}

// Whether the forward's pipeline gathers each chunk itself (row_gather.cuh):
// on the wgmma pipeline (bf16), whose mean tiles are stage 08's tiles.
bool gathers_in_pipeline(TilePath path, int64_t tile_cols) {
  return path == TilePath::kWgmmaPipeline && tile_cols == RowGather::kMeanRows;
}

int64_t forward_ranges(const Problem& p, int64_t chunk_rows) {
  const int64_t last = p.v % chunk_rows == 0 ? chunk_rows : p.v % chunk_rows;
  return std::max(plan_chunk(p, std::min(chunk_rows, p.v)).units.ranges, plan_chunk(p, last).units.ranges);
}

}  // namespace

// The work buffer's use in this forward: first the sort's temporaries (keys,
// sorted keys, identity, rank: 16 bytes per entry, then cub's scratch), then
// the gathered chunks of C.
size_t sort_work_bytes(int64_t v) { return static_cast<size_t>(v) * 16 + radix_sort_pairs_temp_bytes<float>(v, true) + 256; }

SortedForwardPlan plan_sorted_forward(const Problem& p, int64_t chunk_rows) {
  SortedForwardPlan plan;
  const size_t row_bytes = static_cast<size_t>(p.d) * p.element_bytes();
  if (chunk_rows <= 0)
    chunk_rows = std::max<int64_t>(kChunkMultiple, static_cast<int64_t>(kDefaultChunkBytes / row_bytes) / kChunkMultiple *
                                                       kChunkMultiple);
  plan.chunk_rows = std::min(chunk_rows, p.v);
  plan.ranges = forward_ranges(p, plan.chunk_rows);
  plan.work_bytes = std::max(sort_work_bytes(p.v), static_cast<size_t>(plan.chunk_rows) * row_bytes);
  return plan;
}

std::vector<MemoryItem> sorted_forward_items(const Problem& p, const SortedForwardPlan& plan) {
  const size_t n = static_cast<size_t>(p.n), v = static_cast<size_t>(p.v), d = static_cast<size_t>(p.d);
  const size_t tiles = static_cast<size_t>(tile_grid(p).tiles);
  const size_t sum_chunks = static_cast<size_t>((p.n + kSumRows - 1) / kSumRows);
  std::vector<MemoryItem> items = {
      {"tile statistics [tiles][N]", tiles * n * 4},
      {"work buffer", plan.work_bytes},
      {"vocabulary order [V]", v * 4},
      {"tile means [tiles][D]", tiles * d * p.element_bytes()},
      {"E column sums [chunks+1][D]", (sum_chunks + 1) * d * 4},
      {"target position [N]", n * 8},
      {"target logit [N]", n * 4},
      {"range (max, sum) [ranges][N]", static_cast<size_t>(plan.ranges) * n * 8},
      {"row (max, sum) [N]", n * 8},
      // Sized for V: a caller may run the whole vocabulary as one chunk (stage 10's forward into dC).
      {"gathered pieces per C tile [V / 256 + 1]", RowGather::flag_bytes(p.v)},
  };
  return concat(items, per_token_loss_scratch(p));
}

SortedForwardBuffers sorted_forward_buffers(const Scratch& scratch) {
  SortedForwardBuffers b;
  b.kept.vocabulary_order = scratch.get<int>("vocabulary order [V]");
  b.kept.target_position = scratch.get<int64_t>("target position [N]");
  b.kept.target_logit = scratch.get<float>("target logit [N]");
  b.kept.stats = scratch.get<uint32_t>("tile statistics [tiles][N]");
  b.kept.tile_means = scratch.get<void>("tile means [tiles][D]");
  b.e_column_sums = scratch.get<float>("E column sums [chunks+1][D]");
  b.range_states = scratch.get<float2>("range (max, sum) [ranges][N]");
  b.row_states = scratch.get<float2>("row (max, sum) [N]");
  b.work = scratch.get<unsigned char>("work buffer");
  b.gather_counts = scratch.get<unsigned>("gathered pieces per C tile [V / 256 + 1]");
  return b;
}

namespace {
// The sort's temporaries at the start of the work buffer (sort_work_bytes):
// keys, sorted keys, indices, ranks, then cub's scratch.
struct SortTemporaries {
  float* key;
  float* sorted_key;
  int* identity;
  int* rank;
  void* cub;
};
SortTemporaries sort_temporaries(unsigned char* work, int64_t v) {
  SortTemporaries t;
  t.key = reinterpret_cast<float*>(work);
  t.sorted_key = t.key + v;
  t.identity = reinterpret_cast<int*>(t.sorted_key + v);
  t.rank = t.identity + v;
  t.cub = t.rank + v;
  return t;
}
}  // namespace

void sort_vocabulary(const DeviceInputs& in, const SortedForwardBuffers& buffers, cudaStream_t stream) {
  const Problem& p = in.problem;
  const SortTemporaries sort = sort_temporaries(buffers.work, p.v);
  const int64_t sum_chunks = (p.n + kSumRows - 1) / kSumRows;
  float* partial_sums = buffers.e_column_sums;
  float* e_sum = partial_sums + sum_chunks * p.d;
  dispatch_dtype(p.dtype, [&](auto element_type) {
    using T = decltype(element_type);
    const T* e = reinterpret_cast<const T*>(in.e.get());
    const T* c = reinterpret_cast<const T*>(in.c.get());
    static_bool(rows_in_vectors_of(e, p.d * sizeof(T), 8), [&](auto wide) {
      constexpr int kWidth = decltype(wide)::value ? static_cast<int>(8 / sizeof(T)) : 1;
      const int64_t columns = kSumColumns * kWidth;
      valid_row_partial_sums_kernel<T, kWidth>
          <<<dim3(static_cast<unsigned>((p.d + columns - 1) / columns), static_cast<unsigned>(sum_chunks)),
             dim3(kSumColumns, kSumLanes), 0, stream>>>(e, in.targets.get(), p.n, p.d, p.ignore_index, partial_sums);
    });
    CCE_CHECK_LAUNCH();
    sum_partials_kernel<<<blocks_for(p.d), kThreads, 0, stream>>>(partial_sums, sum_chunks, p.d, e_sum);
    CCE_CHECK_LAUNCH();
    const unsigned key_blocks = static_cast<unsigned>((p.v + 7) / 8);
    // ΣE's float4s follow C's 16-byte rows: d % 4 == 0.
    static_bool(rows_in_vectors_of(c, p.d * sizeof(T), 16), [&](auto wide) {
      sort_key_kernel<T, decltype(wide)::value>
          <<<key_blocks, kThreads, 0, stream>>>(c, e_sum, p.v, p.d, sort.key, sort.identity);
    });
    CCE_CHECK_LAUNCH();
  });
  // The order needs the keys' top 16 bits only (sign, exponent, 7 bits of
  // mantissa): 2 radix passes instead of 4; equal tops keep their index order.
  size_t temp = radix_sort_pairs_temp_bytes<float>(p.v, true);
  CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(sort.cub, temp, sort.key, sort.sorted_key, sort.identity,
                                                           buffers.kept.vocabulary_order, static_cast<int>(p.v), 16,
                                                           32, stream));
}

void forward_in_order(const DeviceInputs& in, const SortedForwardPlan& plan, const SortedForwardBuffers& buffers,
                      cudaStream_t stream) {
  const Problem& p = in.problem;
  const TileStatistics& kept = buffers.kept;
  const int64_t tile_cols = tile_grid(p).tile_cols;
  unsigned char* work = buffers.work;
  const int* order = kept.vocabulary_order;
  auto dispatch = [&](auto kernel_of_type) { dispatch_dtype(p.dtype, kernel_of_type); };

  // 1. Each target's sorted position (through the order's inverse, in the work buffer).
  int* rank = sort_temporaries(work, p.v).rank;
  rank_kernel<<<blocks_for(p.v), kThreads, 0, stream>>>(order, p.v, rank);
  CCE_CHECK_LAUNCH();
  target_position_kernel<<<blocks_for(p.n), kThreads, 0, stream>>>(in.targets.get(), rank, p.n, p.v, p.ignore_index,
                                                                   kept.target_position, buffers.row_states,
                                                                   kept.target_logit);
  CCE_CHECK_LAUNCH();

  // 2. The forward over the sorted vocabulary, a gathered chunk at a time:
  // on the wgmma pipeline its idle producer warps gather the chunk while it
  // runs (row_gather.cuh), elsewhere gather_rows_kernel first.
  for (int64_t first = 0; first < p.v; first += plan.chunk_rows) {
    const int64_t rows = std::min(plan.chunk_rows, p.v - first);
    const ChunkPlan chunk = plan_chunk(p, rows);
    if (chunk.units.ranges > plan.ranges) throw CudaError("stage 08: a chunk has more ranges than planned");
    RowGather gather;
    if (gathers_in_pipeline(chunk.path, tile_cols)) {
      gather = RowGather{reinterpret_cast<const __nv_bfloat16*>(in.c.get()), order, first, rows, p.d,
                         reinterpret_cast<__nv_bfloat16*>(work), static_cast<__nv_bfloat16*>(kept.tile_means),
                         buffers.gather_counts};
      CCE_CUDA_CHECK(cudaMemsetAsync(buffers.gather_counts, 0, RowGather::flag_bytes(rows), stream));
    } else dispatch([&](auto element_type) {
      using T = decltype(element_type);
      // A block per (tile, 64 columns' worth of 16-byte pieces): enough blocks to keep the copy in flight.
      const dim3 grid(static_cast<unsigned>((rows + tile_cols - 1) / tile_cols),
                      static_cast<unsigned>(((p.d * sizeof(T) + 15) / 16 + 63) / 64));
      gather_rows_kernel<T><<<grid, 64, 0, stream>>>(reinterpret_cast<const T*>(in.c.get()), order, first, rows, p.d,
                                                     tile_cols, reinterpret_cast<T*>(work),
                                                     static_cast<T*>(kept.tile_means));
      CCE_CHECK_LAUNCH();
    });
    TileStatsParams params{kept.target_position, p.n, p.v, first, p.softcap, buffers.range_states, kept.target_logit,
                           kept.stats};
    launch_tile_units<TileStatsEpilogue>(chunk_problem(p, rows), in.e.get(), work, chunk.path, chunk.units, params,
                                         stream, gather);
    launch_dependent(merge_chunk_kernel, blocks_for(p.n * kMergeLanes), kThreads, stream, buffers.range_states, p.n,
                     chunk.units.ranges, buffers.row_states);
  }
}

void sorted_forward_states(const DeviceInputs& in, const SortedForwardPlan& plan, const SortedForwardBuffers& buffers,
                           cudaStream_t stream) {
  sort_vocabulary(in, buffers, stream);
  forward_in_order(in, plan, buffers, stream);
}

void sorted_forward_finish(const DeviceInputs& in, const SortedForwardBuffers& buffers, float* loss, float* lse,
                           const Scratch& scratch, cudaStream_t stream) {
  const Problem& p = in.problem;
  float* per_token = per_token_loss_buffer(p, loss, scratch);
  launch_dependent(lse_and_loss_kernel, blocks_for(p.n), kThreads, stream, buffers.row_states,
                   buffers.kept.target_logit, buffers.kept.target_position, p.n, lse, per_token);
  finish_loss(p, per_token, in.targets.get(), loss, stream);
}

void sorted_forward(const DeviceInputs& in, const SortedForwardPlan& plan, const SortedForwardBuffers& buffers,
                    float* loss, float* lse, const Scratch& scratch, cudaStream_t stream) {
  sorted_forward_states(in, plan, buffers, stream);
  sorted_forward_finish(in, buffers, loss, lse, scratch, stream);
}

}  // namespace cce::s08
