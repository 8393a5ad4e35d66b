// A chunk's recomputed S tile by its slot relative to the chunk's first:
// the first region_slots in the work buffer's region, the next spill_slots
// spilled into the bf16 dE output, the rest into the rows of the dead tile
// statistics (deterministic_products.h, SlotSpace).
#pragma once

#include <cstdint>

#include "stages/09_deterministic_products/deterministic_products.h"

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

template <typename T>
__device__ __forceinline__ T* slot_tile(const SlotSpace& space, int64_t relative_slot) {
  int64_t index = relative_slot;
  if (index < space.region_slots)
    return reinterpret_cast<T*>(static_cast<unsigned char*>(space.region) + index * space.slot_bytes);
  index -= space.region_slots;
  if (index < space.spill_slots)
    return reinterpret_cast<T*>(static_cast<unsigned char*>(space.spill) + index * space.slot_bytes);
  index -= space.spill_slots;
  const StatsSlotLayout& rows = space.stats_slots;
  const int64_t row = index / rows.row_slots, k = index % rows.row_slots;
  const int64_t offset = k < rows.low_slots ? k * space.slot_bytes : rows.high_offset + (k - rows.low_slots) * space.slot_bytes;
  return reinterpret_cast<T*>(static_cast<unsigned char*>(space.stats) + row * rows.row_bytes + offset);
}

}  // namespace cce::s09
