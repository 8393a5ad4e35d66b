// A chunk's recomputed S tile by its slot relative to the chunk's first:
// the first region_slots in the work buffer's region, the next spill_slots
// spilled into the bf16 dE output, the rest into the rows of the dead tile
// statistics (deterministic_products.h, SlotSpace).
#pragma once

#include <cstdint>

#include "stages/09_deterministic_products/deterministic_products.h"
#include "stages/09_deterministic_products/slot_layout.h"

namespace cce::s09 {

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
