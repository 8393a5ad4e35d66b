// Running an epilogue over every tile of E·Cᵀ, on whichever product the path
// names: the one entry point of the tile engine for the forward stages.
//
//   launch_tile_units<MyEpilogue>(inputs, path, units, params, stream);
//
// MyEpilogue is a class template over the fragment type (see
// wgmma_pipeline.cuh for its three calls); MyEpilogue<Frag>::Params is the
// same plain struct for every Frag, passed by value to the kernel, and
// MyEpilogue<Frag>::kSharedBytes the shared memory it needs beside the
// product's. Block-level paths launch one block per unit; the pipeline
// launches a persistent grid (units.grid blocks), in clusters of two blocks
// where there are two token blocks or more.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "common/check.h"
#include "common/stage.h"
#include "common/tile/tensor_map.h"
#include "common/tile/tile_mma_sync_forward.cuh"
#include "common/tile/tile_path.cuh"
#include "common/tile/units.cuh"
#include "common/tile/wgmma_pipeline.cuh"

namespace cce {

template <class Tile, typename T, bool kAligned, template <class> class Epilogue>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocksPerSm)
    block_units_kernel(const T* __restrict__ e, const T* __restrict__ c, int64_t n, int64_t d, int64_t v,
                       TileUnits units, typename Epilogue<Tile>::Params params) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  static_assert(Tile::kSharedBytes % 16 == 0, "the epilogue's shared memory follows the product's");
  Epilogue<Tile> epilogue(params, shared_bytes + Tile::kSharedBytes);
  for (int64_t u = blockIdx.x; u < units.count(); u += gridDim.x) {
    const Unit unit = units.at(u);
    epilogue.begin(unit);
    Tile tile;
    tile.template for_each_tile<kAligned>(e, n, unit.token_block * Tile::kBM, c, v, nullptr, unit.tile_begin,
                                          unit.tile_end, d, shared_bytes,
                                          [&](int64_t col0) { epilogue.tile(tile, unit, col0); });
    epilogue.end(unit);
  }
}

// dispatch_block_path, plus the product only forwards use (an A100's).
template <typename F>
void dispatch_forward_block_path(TilePath path, F&& f) {
  if (path == TilePath::kMmaSyncForward) {
    f(TileProductMmaSyncForward{}, __nv_bfloat16{}, std::true_type{});
    return;
  }
  dispatch_block_path(path, f);
}

// Blocks of block_units_kernel<..., Epilogue> resident per multiprocessor on
// this GPU for a block-level path (the products' launch bounds ask for 2;
// shared memory may allow fewer, e.g. on an A100); 2 without a GPU.
template <template <class> class Epilogue>
int resident_blocks_per_sm(TilePath path) {
  if (path == TilePath::kWgmmaPipeline || !cuda_device_available()) return 2;
  // Asked once per path: the planners call this on every forward.
  static int known[static_cast<int>(TilePath::kWgmmaPipeline) + 1] = {};
  int& blocks = known[static_cast<int>(path)];
  if (blocks > 0) return blocks;
  dispatch_forward_block_path(path, [&](auto tile, auto element, auto aligned) {
    using Tile = decltype(tile);
    auto kernel = block_units_kernel<Tile, decltype(element), decltype(aligned)::value, Epilogue>;
    const size_t shared = Tile::kSharedBytes + Epilogue<Tile>::kSharedBytes;
    allow_dynamic_shared_memory(kernel, shared);
    CCE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, Tile::kThreads, shared));
  });
  if (blocks < 1) blocks = 1;
  return blocks;
}

// E [p.n, p.d] and C [p.v, p.d] given as device pointers: a stage may run
// the engine on a part of C it gathered itself (stage 08's sorted chunks),
// or have the pipeline gather it while it runs (`gather`, row_gather.cuh).
template <template <class> class Epilogue, class Params>
void launch_tile_units(const Problem& p, const void* e, const void* c, TilePath path, const TileUnits& units,
                       const Params& params, cudaStream_t stream, const RowGather& gather = RowGather{}) {
  if (units.count() == 0) return;
  if (gather.active()) {
    if (path != TilePath::kWgmmaPipeline) throw CudaError("a gather of C's rows runs on the wgmma pipeline only");
    // row_gather.cuh counts pieces in 32 bits and starts on a C tile.
    const int64_t pieces = units.ranges * units.tiles_per_range * gather.pieces_per_tile();
    if (pieces >= (int64_t{1} << 32) || gather.first % WgmmaPipeline::kBN != 0 || gather.rows != p.v || gather.d != p.d)
      throw CudaError("a gather of C's rows that the pipeline cannot make: " + std::to_string(gather.rows) +
                      " rows of " + std::to_string(gather.d) + " from " + std::to_string(gather.first));
  }
  if (path == TilePath::kWgmmaPipeline) {
#ifdef CCE_HAVE_WGMMA
    static_assert(Epilogue<WgmmaPipelineFragment>::kSharedBytes <= kWgmmaPipelineMaxEpilogueBytes,
                  "the path choice (tile_path.cpp) checked the GPU for less shared memory");
    const CUtensorMap e_map = make_bf16_tensor_map(e, p.n, p.d, WgmmaPipeline::kBM);
    const int k_tiles = static_cast<int>((p.d + WgmmaPipeline::kBK - 1) / WgmmaPipeline::kBK);
    const size_t shared = WgmmaPipeline::shared_bytes(Epilogue<WgmmaPipelineFragment>::kSharedBytes);
    // Clusters of two blocks with neighbouring token blocks: each brings half of every C tile to both, so C is
    // read from L2 once per two token blocks (wgmma_pipeline.cuh, kPairs). Where no cluster of two fits (a GPU
    // partition too small), the single-block kernel runs.
    auto pair_kernel = wgmma_pipeline_kernel<Epilogue, true>;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.blockDim = dim3(WgmmaPipeline::kThreads);
    config.dynamicSmemBytes = shared;
    config.stream = stream;
    config.attrs = &cluster;
    config.numAttrs = 1;
    // Resident clusters of two, asked once per device; -1: none fits.
    static std::atomic<int> clusters_on[kMaxDevices] = {};
    std::atomic<int>& asked = clusters_on[current_device_index()];
    int clusters = asked.load();
    if (units.token_blocks >= 2 && clusters >= 0) {
      allow_dynamic_shared_memory(pair_kernel, shared);
      if (clusters == 0) {
        config.gridDim = dim3(2 * static_cast<unsigned>(multiprocessor_count() / 2));
        CCE_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, pair_kernel, &config));
        if (clusters < 1) clusters = -1;
        asked.store(clusters);
      }
    }
    if (units.token_blocks >= 2 && clusters > 0) {
      const CUtensorMap c_half_map = make_bf16_tensor_map(c, p.v, p.d, WgmmaPipeline::kBN / 2);
      // At most units.grid blocks, as on the single-block path (a test forces a small grid to walk several units).
      const int64_t launched = std::min<int64_t>({clusters, units.pair_count(), std::max<int64_t>(1, units.grid / 2)});
      config.gridDim = dim3(static_cast<unsigned>(2 * launched));
      CCE_CUDA_CHECK(cudaLaunchKernelEx(&config, pair_kernel, e_map, c_half_map, units, k_tiles, params, gather));
      return;
    }
    auto kernel = wgmma_pipeline_kernel<Epilogue>;
    allow_dynamic_shared_memory(kernel, shared);
    const CUtensorMap c_map = make_bf16_tensor_map(c, p.v, p.d, WgmmaPipeline::kBN);
    kernel<<<static_cast<unsigned>(units.grid), WgmmaPipeline::kThreads, shared, stream>>>(
        e_map, c_map, units, k_tiles, params, gather);
    CCE_CHECK_LAUNCH();
    return;
#else
    throw CudaError("the wgmma pipeline was chosen in a build without sm_90a");
#endif
  }
  dispatch_forward_block_path(path, [&](auto tile, auto element, auto aligned) {
    using Tile = decltype(tile);
    using T = decltype(element);
    auto kernel = block_units_kernel<Tile, T, decltype(aligned)::value, Epilogue>;
    const size_t shared = Tile::kSharedBytes + Epilogue<Tile>::kSharedBytes;
    allow_dynamic_shared_memory(kernel, shared);
    kernel<<<static_cast<unsigned>(units.grid), Tile::kThreads, shared, stream>>>(
        static_cast<const T*>(e), static_cast<const T*>(c), p.n, p.d, p.v, units, params);
    CCE_CHECK_LAUNCH();
  });
}

template <template <class> class Epilogue, class Params>
void launch_tile_units(const DeviceInputs& in, TilePath path, const TileUnits& units, const Params& params,
                       cudaStream_t stream) {
  launch_tile_units<Epilogue>(in.problem, in.e.get(), in.c.get(), path, units, params, stream);
}

}  // namespace cce
