// Compile-time dispatch over the block-level tile products: kernels written
// once as templates over the Tile type are instantiated for each path.
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

#include "common/check.h"
#include "common/tile/tile_fp32.cuh"
#include "common/tile/tile_mma_sync.cuh"
#include "common/tile/tile_path.h"
#include "common/tile/tile_wgmma.cuh"

namespace cce {

// Calls f(Tile{}, Element{}, std::bool_constant<aligned>{}) for a block-level path.
template <typename F>
void dispatch_block_path(TilePath path, F&& f) {
  switch (path) {
    case TilePath::kFp32: f(TileProductFp32{}, float{}, std::false_type{}); return;
    case TilePath::kMmaSync: f(TileProductMmaSync{}, __nv_bfloat16{}, std::true_type{}); return;
    case TilePath::kMmaSyncUnaligned: f(TileProductMmaSync{}, __nv_bfloat16{}, std::false_type{}); return;
    case TilePath::kWgmma: f(TileProductWgmma{}, __nv_bfloat16{}, std::true_type{}); return;
    case TilePath::kMmaSyncForward: break;  // forwards only: launch.cuh's dispatch_forward_block_path
    case TilePath::kWgmmaPipeline: break;
  }
  throw CudaError(std::string("dispatch_block_path: ") + to_string(path) + " is not a block-level product");
}

}  // namespace cce
