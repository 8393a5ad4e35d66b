// Where S_(row, col) of a kept tile lies in its slot (slot_space.cuh says
// where the slot lies). A header of its own, so that the CPU tests check it
// against the layouts the owners' wgmma reads (kept_products.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cce::s09 {

// Where S_(row, col) of a tile lies in its slot, in elements. fp32 (64×64
// tiles): row-major. bf16 (128×128): two vocabulary halves, each [128
// tokens][64 vocabulary] in rows of 128 bytes whose 16-byte chunks are
// swizzled (chunk c of row r at c ^ (r % 8)): the layout in which wgmma reads
// an operand from shared memory (common/tile/wgmma.cuh), so that the products
// copy a half, or 64 token rows of a half, as one contiguous block.
template <typename T, int kCols>
__host__ __device__ constexpr int64_t s_index(int row, int col) {
  if constexpr (sizeof(T) == 4) {
    return static_cast<int64_t>(row) * kCols + col;
  } else {
    static_assert(kCols == 128, "bf16 S tiles are 128 x 128");
    return (col / 64) * (128 * 64) + row * 64 + ((((col % 64) / 8) ^ (row % 8)) * 8) + col % 8;
  }
}

}  // namespace cce::s09
