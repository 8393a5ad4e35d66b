// Session 60's probe (calls 7 and 8; stage 10's WORKLOG, session 60, has the answer): can the forward read C's rows
// through the vocabulary order itself, instead of gather_rows_kernel writing a sorted copy of C first (stage 08's
// forward_in_order: C read and written once, about 0.5 ms of llama3's and gemma2's calls on an H200)?
//
// Two questions, one run of a few seconds:
//  1. Layout. The tile engine's pipeline takes C's 256-row slice as one 128-byte-swizzled TMA box. A gathered slice
//     would be 256 boxes of one row, row r written at the slice's address + 128·r. That is the same bytes only if
//     the swizzle follows the shared-memory address (the slice starts on a 1024-byte boundary). Checked byte for byte
//     on the first units' slices; the probe exits 1 if a byte differs.
//  2. Rate. A persistent pipeline shaped like the forward's (WgmmaPipeline: one block per SM, 4 stages of 128 rows of
//     E and 256 rows of C, 64 columns each; two consumer warpgroups that only wait and release, so the feed's own
//     ceiling shows) over the units (token block, vocabulary tile) of a problem, C read (a) as 256-row boxes of the
//     sorted copy, as today, or (b) as 256 one-row boxes through the order, issued by the producer warp's 32 lanes.
//     Beside them the sorted copy itself (read C, write it in order), the pass (b) would remove.
//     No clusters here: the forward's pairs of blocks multicast halves of C's slice; (a) and (b) alike load it whole.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I. docs/profiles/session60_h200/tma_row_gather_probe.cu \
//        common/tile/tensor_map.cpp common/check.cpp -lcublas -o /tmp/tma_row_gather_probe
//   /tmp/tma_row_gather_probe [N D V]      (default llama3's 8192 4096 128256)
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/tile/tensor_map.h"
#include "common/tile/wgmma_pipeline.cuh"
#include "common/tile/wgmma_pipeline_shape.h"

namespace {

using cce::WgmmaPipeline;
using P = WgmmaPipeline;
constexpr int kDumpUnits = 4, kDumpSlices = 2;  // the slices whose C bytes are compared

struct Feed {
  int64_t token_blocks, tiles;
  int k_tiles, v;
  const int* order;        // (b): sorted position -> row of C; nullptr: (a), boxes of the sorted copy
  unsigned char* dump;     // the first units' C slices, for the layout check (nullptr: not kept)
  int producer_warps;      // (b): warps issuing the one-row boxes (1 to 4), each announcing its own bytes
};

__global__ void __launch_bounds__(P::kThreads, 1)
    feed_kernel(const __grid_constant__ CUtensorMap e_map, const __grid_constant__ CUtensorMap c_map, Feed feed) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace sm90 = cce::sm90;
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  const uint32_t raw = sm90::shared_address(shared_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_pointer = shared_raw + (base - raw);
  const uint32_t full = base + static_cast<uint32_t>(P::kPipelineBytes);
  const uint32_t empty = full + P::kStages * 8;
  if (threadIdx.x == 0) {
    for (int s = 0; s < P::kStages; ++s) {
      sm90::barrier_init(full + 8 * s, feed.order != nullptr ? feed.producer_warps : 1);
      sm90::barrier_init(empty + 8 * s, P::kConsumers * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int64_t units = feed.token_blocks * feed.tiles;
  const int warpgroup = static_cast<int>(threadIdx.x / 128);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warpgroup == 0) {
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int warps = feed.order != nullptr ? feed.producer_warps : 1;
    if (warp >= warps) return;  // the producer warps
    const int rows_per_lane = P::kBN / (32 * warps);
    int stage = 0;
    uint32_t phase = 0;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
      const int64_t t = u / feed.token_blocks, block = u % feed.token_blocks;  // blocks together share a tile
      int rows[P::kBN / 32];  // (b): this lane's rows of the tile, read once for its k-slices
      if (feed.order != nullptr) {
        for (int j = 0; j < rows_per_lane; ++j) {
          const int64_t sorted = t * P::kBN + (warp * rows_per_lane + j) * 32 + lane;
          rows[j] = sorted < feed.v ? feed.order[sorted] : feed.v;  // past V: a zero-filled box, as (a)'s edge
        }
      }
      for (int kt = 0; kt < feed.k_tiles; ++kt) {
        sm90::barrier_wait(empty + 8 * stage, phase ^ 1);
        const uint32_t destination = base + stage * P::kStageBytes;
        if (lane == 0) {  // each producer warp announces the bytes it brings: warp 0 E's too
          sm90::barrier_expect_bytes(full + 8 * stage, (warp == 0 ? P::kABytes : 0) + P::kBBytes / warps);
          if (warp == 0)
            sm90::tma_load(destination, &e_map, kt * P::kBK, static_cast<int>(block * P::kBM), full + 8 * stage);
          if (feed.order == nullptr)
            sm90::tma_load(destination + P::kABytes, &c_map, kt * P::kBK, static_cast<int>(t * P::kBN),
                           full + 8 * stage);
        }
        __syncwarp();
        if (feed.order != nullptr) {
          for (int j = 0; j < rows_per_lane; ++j)
            sm90::tma_load(destination + P::kABytes +
                               128u * static_cast<uint32_t>((warp * rows_per_lane + j) * 32 + lane),
                           &c_map, kt * P::kBK, rows[j], full + 8 * stage);
        }
        if (++stage == P::kStages) stage = 0, phase ^= 1;
      }
    }
    return;
  }
  int stage = 0;
  uint32_t phase = 0;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    for (int kt = 0; kt < feed.k_tiles; ++kt) {
      sm90::barrier_wait(full + 8 * stage, phase);
      if (feed.dump != nullptr && warpgroup == 1 && u < kDumpUnits && kt < kDumpSlices) {
        const unsigned char* c_slice = base_pointer + stage * P::kStageBytes + P::kABytes;
        unsigned char* out = feed.dump + (u * kDumpSlices + kt) * static_cast<int64_t>(P::kBBytes);
        for (int i = static_cast<int>(threadIdx.x % 128) * 16; i < P::kBBytes; i += 128 * 16)
          *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(c_slice + i);
        asm volatile("bar.sync 1, 128;\n" ::: "memory");  // the warpgroup's reads done before the release
      }
      if (lane == 0) sm90::barrier_arrive(empty + 8 * stage);
      if (++stage == P::kStages) stage = 0, phase ^= 1;
    }
  }
#endif
}

// The sorted copy as stage 08 makes it: row r of the copy is row order[r] of C, 16 bytes a thread.
__global__ void sorted_copy_kernel(const uint4* __restrict__ c, const int* __restrict__ order, int v, int pieces,
                                   uint4* __restrict__ sorted) {
  const int64_t r = blockIdx.x;
  for (int i = threadIdx.x; i < pieces; i += blockDim.x)
    sorted[r * pieces + i] = c[static_cast<int64_t>(order[r]) * pieces + i];
}

__global__ void fill_kernel(uint16_t* x, int64_t count, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    x[i] = static_cast<uint16_t>(0x3c00u | (h & 0x00ffu));  // bf16 in [1, 2): no NaN among the bits compared
  }
}

float median(std::vector<float> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int64_t n = 8192, d = 4096, v = 128256;
    if (argc == 4) n = std::atoll(argv[1]), d = std::atoll(argv[2]), v = std::atoll(argv[3]);
    else if (argc != 1) { std::fprintf(stderr, "usage: %s [N D V]\n", argv[0]); return 2; }
    if (n < P::kBM || d < P::kBK || d % 8 != 0 || v < P::kBN || v > (1LL << 30)) {
      std::fprintf(stderr, "tma_row_gather_probe: needs N >= 128, D >= 64 and a multiple of 8, 256 <= V < 2^30\n");
      return 2;
    }
    int device = 0, sms = 0;
    CCE_CUDA_CHECK(cudaGetDevice(&device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    uint16_t *e = nullptr, *c = nullptr, *sorted = nullptr;
    int* order = nullptr;
    unsigned char *dump_a = nullptr, *dump_b = nullptr;
    const size_t dump_bytes = static_cast<size_t>(kDumpUnits) * kDumpSlices * P::kBBytes;
    CCE_CUDA_CHECK(cudaMalloc(&e, n * d * 2));
    CCE_CUDA_CHECK(cudaMalloc(&c, v * d * 2));
    CCE_CUDA_CHECK(cudaMalloc(&sorted, v * d * 2));
    CCE_CUDA_CHECK(cudaMalloc(&order, v * sizeof(int)));
    CCE_CUDA_CHECK(cudaMalloc(&dump_a, dump_bytes));
    CCE_CUDA_CHECK(cudaMalloc(&dump_b, dump_bytes));
    fill_kernel<<<1024, 256>>>(e, n * d, 1u);
    fill_kernel<<<1024, 256>>>(c, v * d, 2u);
    CCE_CUDA_CHECK(cudaGetLastError());
    std::vector<int> host_order(v);
    std::iota(host_order.begin(), host_order.end(), 0);
    std::shuffle(host_order.begin(), host_order.end(), std::mt19937(1234));  // a trained order is no better for DRAM
    CCE_CUDA_CHECK(cudaMemcpy(order, host_order.data(), v * sizeof(int), cudaMemcpyHostToDevice));

    const int pieces = static_cast<int>(d * 2 / 16);
    cudaEvent_t start, stop;
    CCE_CUDA_CHECK(cudaEventCreate(&start));
    CCE_CUDA_CHECK(cudaEventCreate(&stop));
    auto timed = [&](auto launch) {
      std::vector<float> ms;
      for (int rep = 0; rep < 7; ++rep) {
        CCE_CUDA_CHECK(cudaEventRecord(start));
        launch();
        CCE_CUDA_CHECK(cudaEventRecord(stop));
        CCE_CUDA_CHECK(cudaEventSynchronize(stop));
        float t = 0;
        CCE_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
        if (rep > 0) ms.push_back(t);  // the first: warm-up
      }
      return median(ms);
    };
    const float copy_ms = timed([&] {
      sorted_copy_kernel<<<static_cast<unsigned>(v), 128>>>(reinterpret_cast<const uint4*>(c), order,
                                                            static_cast<int>(v), pieces,
                                                            reinterpret_cast<uint4*>(sorted));
    });
    CCE_CUDA_CHECK(cudaGetLastError());

    const CUtensorMap e_map = cce::make_bf16_tensor_map(e, n, d, P::kBM);
    const CUtensorMap sorted_map = cce::make_bf16_tensor_map(sorted, v, d, P::kBN);
    const CUtensorMap row_map = cce::make_bf16_tensor_map(c, v, d, 1);
    const size_t shared = P::shared_bytes(0);
    CCE_CUDA_CHECK(cudaFuncSetAttribute(feed_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
    Feed feed{(n + P::kBM - 1) / P::kBM, (v + P::kBN - 1) / P::kBN, static_cast<int>((d + P::kBK - 1) / P::kBK),
              static_cast<int>(v), nullptr, nullptr, 1};
    const double bytes = static_cast<double>(feed.token_blocks * feed.tiles) * feed.k_tiles * P::kStageBytes;
    auto run = [&](const CUtensorMap& map, const int* with_order, unsigned char* dump, int warps = 1) {
      Feed f = feed;
      f.order = with_order, f.dump = dump, f.producer_warps = warps;
      feed_kernel<<<static_cast<unsigned>(sms), P::kThreads, shared>>>(e_map, map, f);
    };
    run(sorted_map, nullptr, dump_a);
    run(row_map, order, dump_b);
    CCE_CUDA_CHECK(cudaGetLastError());
    CCE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> a(dump_bytes), b(dump_bytes);
    CCE_CUDA_CHECK(cudaMemcpy(a.data(), dump_a, dump_bytes, cudaMemcpyDeviceToHost));
    CCE_CUDA_CHECK(cudaMemcpy(b.data(), dump_b, dump_bytes, cudaMemcpyDeviceToHost));
    size_t differ = 0;
    for (size_t i = 0; i < dump_bytes; ++i) differ += a[i] != b[i];
    const float box_ms = timed([&] { run(sorted_map, nullptr, nullptr); });
    const float rows_ms = timed([&] { run(row_map, order, nullptr); });
    const float rows4_ms = timed([&] { run(row_map, order, nullptr, 4); });
    CCE_CUDA_CHECK(cudaGetLastError());

    std::printf("problem N=%lld D=%lld V=%lld on %d SMs: %lld units of %d k-slices, %.1f GB into shared memory per "
                "pass\n", static_cast<long long>(n), static_cast<long long>(d), static_cast<long long>(v), sms,
                static_cast<long long>(feed.token_blocks * feed.tiles), feed.k_tiles, bytes / 1e9);
    std::printf("layout: %zu of %zu bytes differ between one 256-row box and 256 one-row boxes: %s\n", differ,
                dump_bytes, differ == 0 ? "the same bytes (the swizzle follows the address)" : "NOT the same bytes");
    std::printf("feed (a) 256-row boxes of the sorted copy: %.3f ms, %.2f TB/s\n", box_ms, bytes / box_ms / 1e9);
    std::printf("feed (b) one-row boxes through the order:  %.3f ms, %.2f TB/s (%.3fx (a)'s time)\n", rows_ms,
                bytes / rows_ms / 1e9, rows_ms / box_ms);
    std::printf("feed (b) issued by 4 producer warps:       %.3f ms, %.2f TB/s (%.3fx (a)'s time)\n", rows4_ms,
                bytes / rows4_ms / 1e9, rows4_ms / box_ms);
    std::printf("the sorted copy (b) would remove: %.3f ms, %.2f TB/s of DRAM (read and write of C)\n", copy_ms,
                2.0 * v * d * 2 / copy_ms / 1e9);
    return differ == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tma_row_gather_probe: %s\n", error.what());
    return 1;
  }
}
