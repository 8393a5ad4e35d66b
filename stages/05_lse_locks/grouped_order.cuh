// The grouped launch order of the 2D grids (stages 05 to 07).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cce {

// Block b of the 1D launch → (token block, vocabulary block), grouped:
// consecutive blocks walk `group` token blocks for one vocabulary
// block before moving to the next, so the blocks resident at one time read a
// few tiles of C and a few tiles of E, which stay in L2.
__device__ __forceinline__ void grouped_block(int64_t b, int64_t token_blocks, int64_t vocab_blocks, int64_t group,
                                              int64_t* token_block, int64_t* vocab_block) {
  const int64_t per_group = group * vocab_blocks;
  const int64_t first = (b / per_group) * group;
  const int64_t group_size = min(group, token_blocks - first);
  const int64_t in_group = b % per_group;
  *token_block = first + in_group % group_size;
  *vocab_block = in_group / group_size;
}

}  // namespace cce
