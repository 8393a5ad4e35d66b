// A chunk's recomputed S tile by its slot relative to the chunk's first:
// the first region_slots in the work buffer's region, the rest spilled into
// the bf16 dE output (drop_before_recompute.h, SlotSpace).
#pragma once

#include <cstdint>

#include "stages/08_drop_before_recompute/drop_before_recompute.h"

namespace cce::s08 {

template <typename T>
__device__ __forceinline__ T* slot_tile(const SlotSpace& space, int64_t relative_slot) {
  auto* base = static_cast<unsigned char*>(relative_slot < space.region_slots ? space.region : space.spill);
  const int64_t index = relative_slot < space.region_slots ? relative_slot : relative_slot - space.region_slots;
  return reinterpret_cast<T*>(base + index * space.slot_bytes);
}

}  // namespace cce::s08
