// The tile engine's Hopper path: a warp-specialized, persistent pipeline
// (sm_90a), built the way the fastest Hopper GEMMs are.
//
// A block of 384 threads is three warpgroups with two jobs:
//   - the producer (warpgroup 0): one thread issues every load. For each
//     k-slice (BK = 64 columns of D) of each tile it waits until a
//     shared-memory stage is empty, then starts two bulk tensor copies (TMA,
//     tensor maps made on the host, tensor_map.h): 128 rows of E and 256 rows
//     of C, 48 KB, which land in the stage already swizzled for wgmma and
//     signal the stage's "full" mbarrier when their bytes have arrived;
//   - two consumers (warpgroups 1 and 2): each multiplies its 64 rows of E
//     by all 256 rows of C with wgmma m64n256k16 (four per slice), keeping
//     one slice's group of wgmmas in flight while it waits for the next
//     slice, and marks a stage empty (one arrival per warp) once its wgmmas
//     have read it. After a tile's last slice it hands its 64×256 piece of
//     logits, 128 fp32 values per thread, to the epilogue.
// kStages = 4 stages (192 KB) let the producer run up to 4 slices ahead.
// setmaxnreg gives the producer's registers to the consumers (40 vs 232).
// With a RowGather (row_gather.cuh) the producer's warps 1-3 first copy C's
// rows into the order the C map reads, and the loading thread waits for each
// tile's rows before its first load of it.
//
// The grid is persistent: one block per multiprocessor walks the units of a
// TileUnits schedule (units.cuh) in the order u = blockIdx.x, + gridDim.x, ...
// With kPairs (two token blocks or more: launch.cuh) the blocks run in
// clusters of two over neighbouring token blocks and the same C tiles: each
// producer brings its E slice and half of the C slice, multicast into both
// blocks, and a stage is empty once the consumers of both blocks are done.
// The consumer warpgroups never meet each other: each owns disjoint rows, so
// an epilogue's Team is one warpgroup, and while one warpgroup folds a tile
// the other can keep the tensor cores busy.
//
// The epilogue is the stage's code, a class template over the fragment type:
//   Epilogue<WgmmaPipelineFragment> epi(params, shared_bytes);
//   epi.begin(unit);                      // before a unit's first tile
//   epi.tile(fragment, unit, col0);       // a tile's logits, columns col0..col0+255
//   epi.end(unit);                        // after its last tile
// exactly as under the block-level products (launch.cuh), so stages plug
// into either engine unchanged.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/tile/row_gather.cuh"
#include "common/tile/team.cuh"
#include "common/tile/units.cuh"
#include "common/tile/wgmma_pipeline_shape.h"
#include "common/tile/wgmma.cuh"

namespace cce {

// One consumer warpgroup's piece of a 128×256 logits tile: 64 rows × 256
// columns, 2 rows × 64 columns per thread (the m16n8 picture of mma_sync.cuh
// repeated 32 times along the columns, warp w on rows 16w..16w+15).
struct WgmmaPipelineFragment {
  static constexpr int kBM = WgmmaPipeline::kBM, kBN = WgmmaPipeline::kBN;
  static constexpr int kRows = 2, kCols = 64;
  static constexpr int kRowSharers = 4;  // the 4 lanes of a quad
  using Team = WarpgroupTeam;
  static constexpr int kTeamThreads = 128;
  // Whether the 8 lanes with the same lane % 4 hold the same columns (column_sums.cuh).
  static constexpr bool kColumnsShareLaneMod4 = true;
  static constexpr int kTeamRows = 64;

  float acc[128];

  __device__ __forceinline__ static int consumer() { return static_cast<int>(threadIdx.x / 128) - 1; }
  __device__ __forceinline__ static int team_row0() { return consumer() * 64; }
  __device__ __forceinline__ static int row_of(int r) {
    return consumer() * 64 + ((threadIdx.x / 32) % 4) * 16 + (threadIdx.x % 32) / 4 + 8 * r;
  }
  __device__ __forceinline__ static int col_of(int c) { return (c / 2) * 8 + (threadIdx.x % 4) * 2 + (c % 2); }
  __device__ __forceinline__ float& z(int r, int c) { return acc[(c / 2) * 4 + r * 2 + (c % 2)]; }
  __device__ __forceinline__ static int sharer_index() { return threadIdx.x % 4; }
};

namespace sm90 {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void barrier_init(uint32_t barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals) : "memory");
}
// The producer's arrival, announcing how many bytes the copies will bring.
__device__ __forceinline__ void barrier_expect_bytes(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_arrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}
// Waits until the barrier's phase of the given parity has completed.
__device__ __forceinline__ void barrier_wait(uint32_t barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  } while (!done);
}
// A box of the tensor map at (column x, row y) into shared memory; its bytes
// count towards `barrier`'s expected transaction.
__device__ __forceinline__ void tma_load(uint32_t destination, const CUtensorMap* map, int x, int y, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          destination),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(barrier)
      : "memory");
}

// A box into the same shared address of every block of the cluster in
// `blocks` (a bit per rank), each block's `barrier` at that address counting its bytes.
__device__ __forceinline__ void tma_load_multicast(uint32_t destination, const CUtensorMap* map, int x, int y,
                                                   uint32_t barrier, uint16_t blocks) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(destination),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(barrier), "h"(blocks)
      : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// The cluster barrier, split; not .aligned: the producer warp's other lanes have exited by then.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// An arrival on the barrier at the same shared address in block `rank` of the cluster.
__device__ __forceinline__ void barrier_arrive_in(uint32_t barrier, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(barrier), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

}  // namespace sm90

// The units a block walks, in order: unit u = blockIdx.x, + gridDim.x, ...;
// with kPairs (clusters of two) pair p = the cluster's index, + the clusters,
// ..., the block of rank r taking the pair's unit r (TileUnits::pair_at).
template <bool kPairs>
struct UnitWalk {
  const TileUnits& units;
  __device__ int64_t first() const { return kPairs ? blockIdx.x / 2 : blockIdx.x; }
  __device__ int64_t stride() const { return kPairs ? gridDim.x / 2 : gridDim.x; }
  __device__ int64_t count() const { return kPairs ? units.pair_count() : units.count(); }
  __device__ Unit at(int64_t i, bool* ghost) const {
    if constexpr (kPairs) return units.pair_at(i, static_cast<int>(blockIdx.x % 2), ghost);
    *ghost = false;
    return units.at(i);
  }
};

template <template <class> class Epilogue, bool kPairs = false>
__global__ void __launch_bounds__(WgmmaPipeline::kThreads, 1)
    wgmma_pipeline_kernel(const __grid_constant__ CUtensorMap e_map, const __grid_constant__ CUtensorMap c_map,
                          TileUnits units, int k_tiles,
                          typename Epilogue<WgmmaPipelineFragment>::Params params, RowGather gather) {
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using P = WgmmaPipeline;
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  const uint32_t raw = sm90::shared_address(shared_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t full = base + static_cast<uint32_t>(P::kPipelineBytes);
  const uint32_t empty = full + P::kStages * 8;
  unsigned char* epilogue_shared = shared_raw + (base - raw) + P::kPipelineBytes + P::kBarrierBytes;

  // kPairs: each block's consumers release a stage in both blocks of the
  // cluster (the partner's producer writes half of it), and each block waits
  // for the other's barriers to exist before any copy or arrival reaches them.
  constexpr uint32_t kBlocks = kPairs ? 2 : 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < P::kStages; ++s) {
      sm90::barrier_init(full + 8 * s, 1);                             // the producer's expect_tx arrival
      sm90::barrier_init(empty + 8 * s, kBlocks * P::kConsumers * 4);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  uint32_t rank = 0;
  if constexpr (kPairs) {
    sm90::cluster_sync();
    rank = sm90::cluster_rank();
  }
  const UnitWalk<kPairs> walk{units};

  const int warpgroup = static_cast<int>(threadIdx.x / 128);
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(P::kProducerRegisters));
    if (threadIdx.x >= 32) {  // warps 1-3: the gather of C's rows, if any (row_gather.cuh)
      if (gather.active())
        gather::copy_pieces(gather, units, units.first_reads_per_range(kPairs), static_cast<unsigned>(walk.stride()));
      return;
    }
    if (threadIdx.x != 0) return;
    int stage = 0;
    uint32_t phase = 0;
    for (int64_t i = walk.first(); i < walk.count(); i += walk.stride()) {
      bool ghost;
      const Unit unit = walk.at(i, &ghost);
      const int row0 = static_cast<int>(unit.token_block * P::kBM);
      for (int64_t t = unit.tile_begin; t < unit.tile_end; ++t) {
        if (gather.active()) gather::wait_for_tile(gather, t);
        for (int kt = 0; kt < k_tiles; ++kt) {
          // Parity phase ^ 1: on the first pass the stages count as empty.
          sm90::barrier_wait(empty + 8 * stage, phase ^ 1);
          const uint32_t destination = base + stage * P::kStageBytes;
          sm90::barrier_expect_bytes(full + 8 * stage, P::kStageBytes);
          sm90::tma_load(destination, &e_map, kt * P::kBK, row0, full + 8 * stage);
          if constexpr (kPairs) {  // this block's half of the C tile, to both blocks
            const uint32_t half = rank * (P::kBBytes / 2);
            sm90::tma_load_multicast(destination + P::kABytes + half, &c_map, kt * P::kBK,
                                     static_cast<int>(t * P::kBN + rank * (P::kBN / 2)), full + 8 * stage, 0x3);
          } else {
            sm90::tma_load(destination + P::kABytes, &c_map, kt * P::kBK, static_cast<int>(t * P::kBN),
                           full + 8 * stage);
          }
          if (++stage == P::kStages) stage = 0, phase ^= 1;
        }
      }
    }
    if constexpr (kPairs) sm90::cluster_sync();  // leave only when the partner no longer writes here
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(P::kConsumerRegisters));
  Epilogue<WgmmaPipelineFragment> epilogue(params, epilogue_shared);
  WgmmaPipelineFragment fragment;
  const int consumer = warpgroup - 1;
  const bool lane0 = threadIdx.x % 32 == 0;
  auto release = [&](int s) {  // the stage's wgmmas are done reading it, in this block
    if (!lane0) return;
    sm90::barrier_arrive(empty + 8 * s);
    if constexpr (kPairs) sm90::barrier_arrive_in(empty + 8 * s, rank ^ 1u);
  };
  int stage = 0;
  uint32_t phase = 0;
  for (int64_t i = walk.first(); i < walk.count(); i += walk.stride()) {
    bool ghost;
    const Unit unit = walk.at(i, &ghost);
    if (ghost) {  // the partner's copies need this block's half of C; nothing here is computed
      for (int64_t t = unit.tile_begin; t < unit.tile_end; ++t)
        for (int kt = 0; kt < k_tiles; ++kt) {
          sm90::barrier_wait(full + 8 * stage, phase);
          release(stage);
          if (++stage == P::kStages) stage = 0, phase ^= 1;
        }
      continue;
    }
    epilogue.begin(unit);
    for (int64_t t = unit.tile_begin; t < unit.tile_end; ++t) {
      int previous = 0;
      for (int kt = 0; kt < k_tiles; ++kt) {
        sm90::barrier_wait(full + 8 * stage, phase);
        const uint32_t slice = base + stage * P::kStageBytes;
        const uint64_t desc_a = wgmma_descriptor(slice + consumer * 64 * 128);
        const uint64_t desc_b = wgmma_descriptor(slice + P::kABytes);
        wgmma_arrive();
#pragma unroll
        for (int ks = 0; ks < P::kBK / 16; ++ks)
          wgmma_m64n256k16(fragment.acc, desc_a + 2 * ks, desc_b + 2 * ks, kt > 0 || ks > 0);
        wgmma_commit();
        if (kt > 0) {
          // The previous slice's wgmmas are done reading: its stage is empty.
          wgmma_wait<1>();
          release(previous);
        }
        previous = stage;
        if (++stage == P::kStages) stage = 0, phase ^= 1;
      }
      wgmma_wait<0>();
      wgmma_fence_operands(fragment.acc);
      release(previous);
      epilogue.tile(fragment, unit, t * P::kBN);
    }
    epilogue.end(unit);
  }
  if constexpr (kPairs) sm90::cluster_sync();  // the partner's last arrivals and copies reach a live block
#else
  (void)e_map, (void)c_map, (void)units, (void)k_tiles, (void)params, (void)gather;
  __trap();  // built without sm_90a: the host never launches this path
#endif
}

}  // namespace cce
