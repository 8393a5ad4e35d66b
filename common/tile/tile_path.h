// Which tile product computes the logits tiles, chosen at run time, and how
// the work is cut into units for it (units.cuh).
//
//   kFp32               fp32 inputs: FFMA tiles of 64×64 (tile_fp32.cuh)
//   kMmaSync            bf16, any GPU from sm_80: mma.sync tiles of 128×128 (tile_mma_sync.cuh)
//   kMmaSyncUnaligned   the same with element loads, when D % 8 != 0
//   kMmaSyncForward     bf16 forwards without the Hopper paths (an A100): mma.sync tiles
//                       of 128×128 on 4 warps of 64×64, two blocks per SM
//                       (tile_mma_sync_forward.cuh); block-level kernels take kMmaSync
//   kWgmma              Hopper (sm_90a build, compute capability 9.0): the block-level
//                       wgmma product, 128×128 tiles (tile_wgmma.cuh)
//   kWgmmaPipeline      Hopper: the warp-specialized TMA + wgmma pipeline, 128×256
//                       tiles on a persistent grid (wgmma_pipeline.cuh)
//
// Forward kernels (one epilogue over units) use the fastest path the
// problem, the build and the device allow; kernels that need the block's
// shared memory after each tile (the backward products) use block-level
// paths only. A path that cannot run here falls back to the next one with a
// one-line note on stderr, printed once, never a crash.
#pragma once

#include <cstdint>
#include <string>

#include "common/problem.h"
#include "common/tile/units.cuh"

namespace cce {

// In order of speed: CCE_TILE_PATH may ask for a path no later than the fastest.
enum class TilePath { kFp32, kMmaSync, kMmaSyncUnaligned, kMmaSyncForward, kWgmma, kWgmmaPipeline };

const char* to_string(TilePath path);

struct TileShape {
  int64_t bm, bn;
};
TileShape tile_shape(TilePath path);

// The fastest path for a forward (any path) or for a block-level kernel.
// The environment variable CCE_TILE_PATH = fp32 | mma_sync | wgmma | pipeline
// asks for a slower path (benchmarks compare them); a path that cannot run
// for this problem is refused with a note and the fastest is used.
TilePath choose_forward_path(const Problem& problem);
TilePath choose_block_path(const Problem& problem);

// How a stage wants its units cut. ranges = 0: as the path suggests:
//   block-level paths: `fill_wave` ? enough ranges to fill one wave of
//                      resident blocks : one tile per unit;
//   the pipeline:      the number of ranges (at most max_ranges) that balances
//                      the tiles over the persistent blocks best.
// token_group = 0: 8 token blocks for block-level paths with one tile per
// unit; all token blocks otherwise, or for the pipeline as many as keep
// about 20 MB of E tiles together.
struct UnitPolicy {
  int64_t ranges = 0;
  bool fill_wave = false;
  int blocks_per_sm = 2;  // resident blocks per multiprocessor, for fill_wave (see resident_blocks_per_sm)
  int64_t max_ranges = 1 << 20;
  int64_t token_group = 0;
};
TileUnits plan_tile_units(const Problem& problem, TilePath path, const UnitPolicy& policy);

// Multiprocessors of the current device (132, an H100's, without one).
int multiprocessor_count();

}  // namespace cce
