// C's rows gathered into another order by the pipeline's idle producer warps,
// ahead of the tiles that read them (wgmma_pipeline.cuh).
//
// Stage 08 runs its forward over C in a sorted order, and so first copies the
// rows of C into that order (with each 128-row tile's mean row): a pass over C
// that only moves bytes while the tensor cores wait. In the pipeline only one
// thread of the producer warpgroup issues loads; its warps 1-3 are free. With
// a RowGather they make the copy while the consumers multiply: they take
// pieces (128 sorted rows × 256 columns: a mean tile's rows over one segment
// of D) from a counter, in the order in which the units first read the tiles
// (TileUnits::tile_in_first_read_order), and count each finished piece into
// its 256-row C tile's `ready`. The producer waits for a tile's count before
// its first load of that tile.
// The copy and the mean are those of stage 08's gather_rows_kernel, sums in
// row order: the same bits.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "common/device_math.cuh"
#include "common/tile/units.cuh"
#include "common/tile/wgmma_pipeline_shape.h"

namespace cce {

// The mean of a tile's rows over 16 bytes of columns: each column summed in
// row order in float, rounded once. Stage 08's gather_rows_kernel and the
// pipeline's copy both use it, so their means are the same bits.
template <typename T>
struct RowMean16 {
  static constexpr int kColumns = 16 / sizeof(T);
  float sum[kColumns] = {};
  __device__ __forceinline__ void add(const uint4& row) {
    const T* parts = reinterpret_cast<const T*>(&row);
#pragma unroll
    for (int k = 0; k < kColumns; ++k) sum[k] += to_float(parts[k]);
  }
  __device__ __forceinline__ uint4 mean(int rows) const {
    T result[kColumns];
#pragma unroll
    for (int k = 0; k < kColumns; ++k) result[k] = from_float<T>(sum[k] / static_cast<float>(rows));
    return *reinterpret_cast<const uint4*>(result);
  }
};

struct RowGather {
  const __nv_bfloat16* source = nullptr;  // C [*, d] in the caller's order
  const int* order = nullptr;             // sorted position -> row of source
  int64_t first = 0;                      // the first sorted position of this launch (a multiple of 256)
  int64_t rows = 0;                       // sorted rows gathered; 0: no gather (the C map's rows are ready)
  int64_t d = 0;
  __nv_bfloat16* out = nullptr;           // [rows][d]: sorted rows first .. first + rows - 1, which the C map reads
  __nv_bfloat16* means = nullptr;         // [mean tiles][d] of the whole order: tile (first + r) / kMeanRows's mean
  unsigned* ready = nullptr;              // [⌈rows / 256⌉ + 1]: pieces done per C tile, then the next piece to take;
                                          // zero before the launch
  static constexpr int kMeanRows = WgmmaPipeline::kBN / 2;  // stage 08's tile of 128 sorted rows (bf16)
  static constexpr int kSegmentCols = 32 * 8;               // a warp's columns: 8 bf16 (16 bytes) per lane
  static constexpr int kBatch = 4;                          // rows whose loads a lane keeps in flight

  __host__ __device__ bool active() const { return rows > 0; }
  __host__ __device__ static int64_t c_tiles_of(int64_t rows) {
    return (rows + WgmmaPipeline::kBN - 1) / WgmmaPipeline::kBN;
  }
  __host__ __device__ int64_t c_tiles() const { return c_tiles_of(rows); }
  __host__ __device__ int64_t segments() const { return (d + kSegmentCols - 1) / kSegmentCols; }
  __host__ __device__ int64_t pieces_per_tile() const { return 2 * segments(); }
  static size_t flag_bytes(int64_t rows) { return 4 * static_cast<size_t>(c_tiles_of(rows) + 1); }
};

namespace gather {

// C's rows are read once here: first out of L2, which keeps the tiles the consumers read.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint4 load_streaming(const void* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// One warp's share of the gather: pieces until none is left.
__device__ inline void copy_pieces(const RowGather& g, const TileUnits& units, unsigned per_range, unsigned stride) {
  // 32-bit indices: a launch has fewer than 2^32 pieces (checked on the host), and the producer's
  // 40 registers hold them without 64-bit divisions.
  const int lane = static_cast<int>(threadIdx.x % 32);
  const unsigned segments = static_cast<unsigned>(g.segments()), per_tile = static_cast<unsigned>(g.pieces_per_tile());
  const unsigned tiles = static_cast<unsigned>(g.c_tiles());
  const unsigned total = static_cast<unsigned>(units.ranges * units.tiles_per_range) * per_tile;
  unsigned* next = g.ready + tiles;
  const uint64_t policy = evict_first_policy();
  for (;;) {
    unsigned j = 0;
    if (lane == 0) j = atomicAdd(next, 1u);
    j = __shfl_sync(0xffffffffu, j, 0);
    if (j >= total) return;
    const int tile = units.tile_in_first_read_order(j / per_tile, per_range, stride);
    if (tile < 0 || static_cast<unsigned>(tile) >= tiles) continue;  // a slot past the last range's end
    const unsigned within = j % per_tile;
    const int64_t r0 = static_cast<int64_t>(tile) * WgmmaPipeline::kBN + (within / segments) * RowGather::kMeanRows;
    const int64_t col = static_cast<int64_t>((within % segments) * RowGather::kSegmentCols + lane * 8);
    if (r0 < g.rows && col < g.d) {
      const int count = static_cast<int>(g.rows - r0 < RowGather::kMeanRows ? g.rows - r0 : RowGather::kMeanRows);
      const int* order = g.order + g.first + r0;
      __nv_bfloat16* out = g.out + r0 * g.d + col;
      RowMean16<__nv_bfloat16> mean;
      for (int r = 0; r < count; r += RowGather::kBatch) {
        uint4 value[RowGather::kBatch];
#pragma unroll
        for (int u = 0; u < RowGather::kBatch; ++u)
          if (r + u < count) value[u] = load_streaming(g.source + static_cast<int64_t>(__ldg(order + r + u)) * g.d + col, policy);
#pragma unroll
        for (int u = 0; u < RowGather::kBatch; ++u) {
          if (r + u >= count) break;
          *reinterpret_cast<uint4*>(out + static_cast<int64_t>(r + u) * g.d) = value[u];
          mean.add(value[u]);
        }
      }
      *reinterpret_cast<uint4*>(g.means + ((g.first + r0) / RowGather::kMeanRows) * g.d + col) = mean.mean(count);
    }
    // This lane's stores before the copies (the async proxy) that read them, then one count per piece.
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
    __syncwarp();
    if (lane == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(g.ready + tile) : "memory");
  }
}

// The producer's wait before its first load of C tile `tile`.
__device__ inline void wait_for_tile(const RowGather& g, int64_t tile) {
  const unsigned want = static_cast<unsigned>(g.pieces_per_tile());
  unsigned done;
  for (;;) {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(done) : "l"(g.ready + tile) : "memory");
    if (done >= want) break;
    __nanosleep(200);
  }
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

}  // namespace gather
}  // namespace cce
