// Stage 08's backward after the decision: stage 06's tile backward over the
// kept pairs only, the dropped tail's share of dC, and the exact terms of the
// targets that fall in dropped tiles. Every sum into dE and dC is an fp32
// atomic add, as in stage 06: the result is not bitwise the same from run to run.
#include <vector>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/tile/tile_path.cuh"
#include "stages/06_fused_backward/backward_tile.cuh"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"

namespace cce::s08 {
namespace {

constexpr int kThreads = 256;

// Stage 06's fused backward kernel with a list of (token block, tile) pairs
// for its blocks, and columns that are positions in the sorted vocabulary.
template <class Tile, typename T, bool kAligned>
__global__ void __launch_bounds__(256, 1)
    kept_backward_kernel(const T* __restrict__ e, const T* __restrict__ c, const int64_t* __restrict__ targets,
                         const float* __restrict__ lse, const float* __restrict__ grad_scale, int64_t n, int64_t d,
                         int64_t v, float softcap, const int2* __restrict__ pairs, const int* __restrict__ order,
                         float* __restrict__ de_acc, float* __restrict__ dc_acc) {
  using Products = typename BackwardProductsFor<T>::type;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  RowGradientInputs<Tile> rows(shared_bytes + BackwardShared<Tile, T>::kWork);
  const int2 pair = pairs[blockIdx.x];  // token block, sorted tile
  const int64_t row0 = static_cast<int64_t>(pair.x) * Tile::kBM, col0 = static_cast<int64_t>(pair.y) * Tile::kBN;
  if (!rows.load(lse, grad_scale, targets, row0, n)) return;
  Tile tile;
  tile.template for_each_tile<kAligned>(e, n, row0, c, v, order, pair.y, pair.y + 1, d, shared_bytes, [](int64_t) {});
  Products products(shared_bytes);
  store_tile_gradient(
      tile, rows, col0, v, softcap, [&](int64_t position) { return order[position]; }, products, [](float) {});
  __syncthreads();  // S is in shared memory
  products.template run<kAligned>(e, c, n, v, d, row0, col0, order, de_acc, dc_acc);
}

// Every row of tile T gets G_T / |T| (the tile's share of the dropped mass).
__global__ void add_tail_share_kernel(const float* __restrict__ tail_sums, int64_t tail_ld, const int* __restrict__ order,
                                      int64_t v, int64_t d, int64_t tile_cols, float* __restrict__ dc_acc) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= v * d) return;
  const int64_t position = x / d, k = x % d, tile = position / tile_cols;
  const int64_t rows = v - tile * tile_cols < tile_cols ? v - tile * tile_cols : tile_cols;
  dc_acc[static_cast<int64_t>(order[position]) * d + k] += tail_sums[tile * tail_ld + k] / static_cast<float>(rows);
}

// dE_i += a_i C_{t_i} and dC_{t_i} += a_i E_i, where a_i ≠ 0 (t_i's tile dropped).
template <typename T>
__global__ void add_target_terms_kernel(const float* __restrict__ coefficient, const int64_t* __restrict__ targets,
                                        const T* __restrict__ e, const T* __restrict__ c, int64_t n, int64_t d,
                                        float* __restrict__ de_acc, float* __restrict__ dc_acc) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= n * d) return;
  const int64_t i = x / d, k = x % d;
  const float a = coefficient[i];
  if (a == 0.0f) return;
  const int64_t t = targets[i];
  de_acc[x] += a * to_float(c[t * d + k]);
  atomicAdd(dc_acc + t * d + k, a * to_float(e[x]));  // tokens may share a target
}

unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

}  // namespace

std::vector<int2> kept_pair_list(const TileGrid& grid, const std::vector<uint8_t>& keep) {
  std::vector<int2> pairs;
  for (int64_t t = 0; t < grid.tiles; ++t)
    for (int64_t b = 0; b < grid.token_blocks; ++b)
      if (keep[static_cast<size_t>(t * grid.token_blocks + b)] != 0)
        pairs.push_back(make_int2(static_cast<int>(b), static_cast<int>(t)));
  return pairs;
}

void backward_over_kept_pairs(const DeviceInputs& in, const KeptBackwardInputs& kept, cudaStream_t stream) {
  const Problem& p = in.problem;
  if (kept.pair_count == 0) return;
  dispatch_block_path(choose_block_path(p), [&](auto tile, auto element, auto aligned) {
    using Tile = decltype(tile);
    using T = decltype(element);
    auto kernel = kept_backward_kernel<Tile, T, decltype(aligned)::value>;
    const size_t shared = BackwardShared<Tile, T>::kBytes;
    allow_dynamic_shared_memory(kernel, shared);
    kernel<<<static_cast<unsigned>(kept.pair_count), Tile::kThreads, shared, stream>>>(
        reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()), in.targets.get(), kept.lse,
        kept.grad_scale, p.n, p.d, p.v, p.softcap, kept.pairs, kept.vocabulary_order, kept.de_acc, kept.dc_acc);
    CCE_CHECK_LAUNCH();
  });
}

void add_tail_share(const Problem& p, const TileGrid& grid, const TailSums& tail, const int* vocabulary_order,
                    float* dc_acc, cudaStream_t stream) {
  if (tail.sums == nullptr || p.v * p.d == 0) return;
  add_tail_share_kernel<<<blocks_for(p.v * p.d), kThreads, 0, stream>>>(tail.sums, tail.ld, vocabulary_order, p.v,
                                                                         p.d, grid.tile_cols, dc_acc);
  CCE_CHECK_LAUNCH();
}

void add_target_terms(const DeviceInputs& in, const float* coefficient, float* de_acc, float* dc_acc,
                      cudaStream_t stream) {
  const Problem& p = in.problem;
  if (p.n * p.d == 0) return;
  dispatch_dtype(p.dtype, [&](auto element_type) {
    using T = decltype(element_type);
    add_target_terms_kernel<T><<<blocks_for(p.n * p.d), kThreads, 0, stream>>>(
        coefficient, in.targets.get(), reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()),
        p.n, p.d, de_acc, dc_acc);
    CCE_CHECK_LAUNCH();
  });
}

}  // namespace cce::s08
