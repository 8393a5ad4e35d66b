#include "stages/05_lse_locks/lse_locks.h"

#include <cstdio>

#include "common/check.h"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/fused_ce.cuh"
#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"
#include "stages/03_fused_gemm_ce/tile_dispatch.cuh"
#include "stages/04_indexed_dot/indexed_dot.h"
#include "stages/05_lse_locks/grouped_order.cuh"

namespace cce::s05 {
namespace {

__device__ __forceinline__ float log_add_exp(float a, float b) {
  const float m = fmaxf(a, b);
  if (m == -INFINITY) return -INFINITY;
  return m + log1pf(__expf(fminf(a, b) - m));
}

__global__ void fill_kernel(float* __restrict__ x, int64_t n, float value) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

// Stage 07's sorting statistic: Σ_i z_ij over the tile's valid rows, per
// column, added into shared memory (the tile holds softcapped logits, −inf
// past V, after fold_tile_into_rows).
template <class Tile>
__device__ __forceinline__ void add_column_sums(Tile& tile, int64_t row0, int64_t n, float* tile_column_sums) {
#pragma unroll
  for (int c = 0; c < Tile::kCols; ++c) {
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < Tile::kRows; ++r)
      if (row0 + Tile::row_of(r) < n && tile.z(r, c) != -INFINITY) sum += tile.z(r, c);
    atomicAdd(&tile_column_sums[Tile::col_of(c)], sum);
  }
}

template <class Tile, typename T, bool kAligned>
__global__ void __launch_bounds__(256, Tile::kMinBlocksPerSm)
    locked_lse_kernel(const T* __restrict__ e, const T* __restrict__ c, int64_t n, int64_t d, int64_t v,
                      float softcap, int64_t token_blocks, int64_t vocab_blocks, float* __restrict__ lse,
                      int* __restrict__ locks, float* __restrict__ column_sums) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  RowStates<Tile> states(shared_bytes + Tile::kSharedBytes);
  float* tile_column_sums = reinterpret_cast<float*>(shared_bytes + Tile::kSharedBytes + RowStates<Tile>::kSharedBytes);
  for (int i = threadIdx.x; i < Tile::kBN; i += blockDim.x) tile_column_sums[i] = 0.0f;  // init() syncs
  int64_t token_block, vocab_block;
  grouped_block(blockIdx.x, token_blocks, vocab_blocks, kGroupTokenBlocks, &token_block, &vocab_block);
  const int64_t row0 = token_block * Tile::kBM;
  states.init(nullptr, row0, n);  // LSE only: the target term is stage 04's

  Tile tile;
  tile.template for_each_tile<kAligned>(e, n, row0, c, v, vocab_block, vocab_block + 1, d, shared_bytes,
                                        [&](int64_t col0) {
                                          fold_tile_into_rows(tile, states, row0, col0, v, softcap, nullptr);
                                          if (column_sums != nullptr) add_column_sums(tile, row0, n, tile_column_sums);
                                        });
  const OnlineSoftmax row_state = merge_row_states(states);  // its barrier also publishes the column sums
  if (column_sums != nullptr && threadIdx.x < Tile::kBN && vocab_block * Tile::kBN + threadIdx.x < v)
    atomicAdd(&column_sums[vocab_block * Tile::kBN + threadIdx.x], tile_column_sums[threadIdx.x]);

  // Merge into the global LSE of these rows under the token block's lock.
  // Acquire: one thread spins on atomicCAS, then a fence orders the reads
  // below after the previous holder's writes. Release: fence, then unlock.
  // The LSE is read and written with .cg accesses (L2, not the SM's own L1,
  // which another SM's writes do not update).
  if (threadIdx.x == 0) {
    while (atomicCAS(&locks[token_block], 0, 1) != 0) __nanosleep(64);
    __threadfence();
  }
  __syncthreads();
  const int64_t row = row0 + threadIdx.x;
  if (threadIdx.x < Tile::kBM && row < n) __stcg(&lse[row], log_add_exp(__ldcg(&lse[row]), row_state.lse()));
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) atomicExch(&locks[token_block], 0);
}

template <class Tile>
constexpr size_t kernel_shared_bytes() {
  return Tile::kSharedBytes + RowStates<Tile>::kSharedBytes + Tile::kBN * sizeof(float);
}

}  // namespace

LockedGrid plan_locked_grid(const Problem& p) {
  LockedGrid g;
  const TilePath path = choose_tile_path(p, cuda_device_available());
  g.path = static_cast<int>(path);
  dispatch_tile_path(path, [&](auto tile, auto, auto) {
    using Tile = decltype(tile);
    g.token_blocks = (p.n + Tile::kBM - 1) / Tile::kBM;
    g.vocab_blocks = (p.v + Tile::kBN - 1) / Tile::kBN;
  });
  return g;
}

void locked_lse(const DeviceInputs& in, const LockedGrid& grid, int* locks, float* lse, float* column_sums,
                cudaStream_t stream) {
  const Problem& p = in.problem;
  constexpr int kFillThreads = 256;
  fill_kernel<<<static_cast<unsigned>((p.n + kFillThreads - 1) / kFillThreads), kFillThreads, 0, stream>>>(
      lse, p.n, -INFINITY);
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaMemsetAsync(locks, 0, grid.token_blocks * sizeof(int), stream));
  if (column_sums != nullptr) CCE_CUDA_CHECK(cudaMemsetAsync(column_sums, 0, p.v * sizeof(float), stream));
  dispatch_tile_path(static_cast<TilePath>(grid.path), [&](auto tile, auto zero, auto aligned) {
    using Tile = decltype(tile);
    using T = decltype(zero);
    auto kernel = locked_lse_kernel<Tile, T, decltype(aligned)::value>;
    const size_t shared = kernel_shared_bytes<Tile>();
    CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    kernel<<<static_cast<unsigned>(grid.blocks()), Tile::kThreads, shared, stream>>>(
        reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()), p.n, p.d, p.v, p.softcap,
        grid.token_blocks, grid.vocab_blocks, lse, locks, column_sums);
    CCE_CHECK_LAUNCH();
  });
}

std::vector<MemoryItem> LseLocksStage::workspace(const Problem& p, bool) const {
  const LockedGrid g = plan_locked_grid(p);
  std::vector<MemoryItem> items = {{"locks", static_cast<size_t>(g.token_blocks) * sizeof(int)},
                                   {"target dot", static_cast<size_t>(p.n) * 4}};
  if (p.reduction != Reduction::kNone) items.push_back({"per-token loss", static_cast<size_t>(p.n) * 4});
  return items;
}

void LseLocksStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  grid_ = plan_locked_grid(p);
  if (locks_.size() != static_cast<size_t>(grid_.token_blocks)) locks_ = DeviceBuffer<int>(grid_.token_blocks);
  if (dot_.size() != static_cast<size_t>(p.n)) dot_ = DeviceBuffer<float>(p.n);
  const bool reduce = p.reduction != Reduction::kNone;
  if (reduce && loss_per_token_.size() != static_cast<size_t>(p.n)) loss_per_token_ = DeviceBuffer<float>(p.n);
  locked_lse(in, grid_, locks_.get(), lse, column_sums_, stream);
  s04::indexed_dot(in, s04::DotVariant::k2d, dot_.get(), stream);
  float* per_token = reduce ? loss_per_token_.get() : loss;
  s04::finalize_token_loss(p, in.targets.get(), lse, dot_.get(), per_token, stream);
  if (reduce) reduce_token_losses(p, per_token, in.targets.get(), loss, stream);
}

void LseLocksStage::backward(const DeviceInputs&, const float*, const float*, void*, void*, cudaStream_t) {
  throw InputError("stage 05 computes the forward only; the fused backward comes in stage 06");
}

std::vector<std::string> LseLocksStage::report_lines() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "grid         %lld token blocks x %lld vocabulary blocks = %lld blocks, groups of %lld; %s",
                static_cast<long long>(grid_.token_blocks), static_cast<long long>(grid_.vocab_blocks),
                static_cast<long long>(grid_.blocks()), static_cast<long long>(kGroupTokenBlocks),
                to_string(static_cast<TilePath>(grid_.path)));
  return {buf};
}

void LseLocksStage::release_workspace() {
  locks_.reset();
  dot_.reset();
  loss_per_token_.reset();
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<LseLocksStage>(); }

}  // namespace cce::s05
