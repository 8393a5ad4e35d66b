// Stage 06's device building blocks for one (token block × vocabulary tile)
// of the backward, kept apart from its kernel so that another kernel can call them too:
//   RowGradientInputs:   per-row LSE, upstream scale g and target of a token block, in shared memory;
//   store_tile_gradient: a recomputed logits tile → S = dloss/dlogits into the products' shared S;
//   the two products dE += S·C, dC += Sᵀ·E (backward_products.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/tile/backward_products.cuh"
#include "common/tile/units.cuh"

namespace cce {

template <class Tile>
struct RowGradientInputs;

// The shared memory of a tile's backward: the tile product's buffers, reused
// by the two products once the tile is computed, then the rows' inputs.
template <class Tile, typename T>
struct BackwardShared {
  using Products = typename BackwardProductsFor<T>::type;
  static_assert(Products::kBM == Tile::kBM && Products::kBN == Tile::kBN, "tile shapes must agree");
  static constexpr size_t kWork = Tile::kSharedBytes > Products::kSharedBytes ? Tile::kSharedBytes : Products::kSharedBytes;
  static constexpr size_t kBytes = kWork + static_cast<size_t>(Tile::kBM) * 12;  // RowGradientInputs
};

// Launches a tile-backward kernel (one block per unit of one tile) with that shared memory.
template <class Tile, typename T, class Kernel, class... Args>
void launch_tile_backward(Kernel kernel, const TileUnits& units, cudaStream_t stream, Args... args) {
  const size_t shared = BackwardShared<Tile, T>::kBytes;
  allow_dynamic_shared_memory(kernel, shared);
  kernel<<<static_cast<unsigned>(units.grid), Tile::kThreads, shared, stream>>>(args...);
  CCE_CHECK_LAUNCH();
}

template <class Tile>
struct RowGradientInputs {
  static constexpr size_t kSharedBytes = static_cast<size_t>(Tile::kBM) * 12;
  float* lse;   // [BM]
  float* g;     // [BM]: the upstream scale of the row's loss; 0 for ignored tokens and past N
  int* target;  // [BM]: −1 past N

  __device__ explicit RowGradientInputs(unsigned char* shared) {
    lse = reinterpret_cast<float*>(shared);
    g = lse + Tile::kBM;
    target = reinterpret_cast<int*>(g + Tile::kBM);
  }
  // Loads the block's rows; returns false (for every thread) when no row of
  // the block has a gradient (all ignored): the caller can skip the tile.
  __device__ bool load(const float* __restrict__ all_lse, const float* __restrict__ grad_scale,
                       const int64_t* __restrict__ targets, int64_t row0, int64_t n) {
    bool any_gradient = false;
    for (int i = threadIdx.x; i < Tile::kBM; i += blockDim.x) {
      const bool in_range = row0 + i < n;
      lse[i] = in_range ? all_lse[row0 + i] : 0.0f;
      g[i] = in_range ? grad_scale[row0 + i] : 0.0f;
      target[i] = in_range ? static_cast<int>(targets[row0 + i]) : -1;  // V < 2^31
      any_gradient |= g[i] != 0.0f;
    }
    return __syncthreads_or(any_gradient);
  }
};

// S_ij = g_i · u_ij with u_ij = (exp(z_ij − LSE_i) − [vocab_j = t_i]) · softcap'(z_ij),
// 0 for rows without a gradient and columns past V. vocab_of(position) names
// the vocabulary entry of tile column position col0 + c: the caller gives the
// vocabulary order (this stage's kernel the identity). visit(u) is a
// per-value callback that sees every unscaled value before g scales it, so a
// caller can judge the tile from it (this stage's kernel ignores it). The
// caller syncs before the products read S.
template <class Tile, class Products, class VocabOf, class Visit>
__device__ __forceinline__ void store_tile_gradient(Tile& tile, const RowGradientInputs<Tile>& rows, int64_t col0,
                                                    int64_t v, float softcap, VocabOf&& vocab_of, Products& products,
                                                    Visit&& visit) {
#pragma unroll
  for (int r = 0; r < Tile::kRows; ++r) {
    const int tr = Tile::row_of(r);
#pragma unroll
    for (int c = 0; c < Tile::kCols; ++c) {
      const int tc = Tile::col_of(c);
      const int64_t position = col0 + tc;
      float s = 0.0f;
      if (position < v && rows.g[tr] != 0.0f) {
        // EXERCISE(the S tile): u = (softmax − onehot)·softcap'(z); visit(u); s = g·u
        const float z = apply_softcap(tile.z(r, c), softcap);
        const float p = __expf(z - rows.lse[tr]);
        const float unscaled = (p - (vocab_of(position) == rows.target[tr] ? 1.0f : 0.0f)) * softcap_derivative(z, softcap);
        visit(unscaled);
        s = rows.g[tr] * unscaled;
        // END EXERCISE
      }
      products.store_s(tr, tc, s);
    }
  }
}

}  // namespace cce
