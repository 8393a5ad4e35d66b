#include "stages/06_fused_backward/fused_backward.h"

#include <cstdint>
#include <cstdio>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/tile/tile_path.cuh"
#include "common/token_reduction.h"
#include "stages/05_lse_locks/lse_locks.h"
#include "stages/06_fused_backward/backward_tile.cuh"

namespace cce::s06 {
namespace {

template <class Tile, typename T, bool kAligned>
__global__ void __launch_bounds__(256, 1)
    fused_backward_kernel(const T* __restrict__ e, const T* __restrict__ c, const int64_t* __restrict__ targets,
                          const float* __restrict__ lse, const float* __restrict__ grad_scale, int64_t n, int64_t d,
                          int64_t v, float softcap, TileUnits units, float* __restrict__ de_acc,
                          float* __restrict__ dc_acc) {
  using Products = typename BackwardProductsFor<T>::type;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  RowGradientInputs<Tile> rows(shared_bytes + BackwardShared<Tile, T>::kWork);
  const Unit unit = units.at(blockIdx.x);
  const int64_t row0 = unit.token_block * Tile::kBM, col0 = unit.tile_begin * Tile::kBN;
  if (!rows.load(lse, grad_scale, targets, row0, n)) return;  // all tokens ignored: S = 0

  Tile tile;
  tile.template for_each_tile<kAligned>(e, n, row0, c, v, nullptr, unit.tile_begin, unit.tile_end, d, shared_bytes,
                                        [](int64_t) {});
  // The tile is in the accumulators and the tile's shared memory is free.
  Products products(shared_bytes);
  store_tile_gradient(tile, rows, col0, v, softcap, [](int64_t position) { return position; }, products,
                      [](float) {});
  __syncthreads();
  products.template run<kAligned>(e, c, n, v, d, row0, col0, nullptr, de_acc, dc_acc);
}

template <typename T>
__global__ void cast_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) dst[i] = from_float<T>(src[i]);
}

// 4 values per thread: a 16-byte load, an 8-byte store (both aligned).
__global__ void cast4_bf16_kernel(const float4* __restrict__ src, uint2* __restrict__ dst, int64_t count4) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count4) return;
  const float4 x = src[i];
  const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y), hi = __floats2bfloat162_rn(x.z, x.w);
  uint2 packed;
  packed.x = *reinterpret_cast<const unsigned*>(&lo);
  packed.y = *reinterpret_cast<const unsigned*>(&hi);
  dst[i] = packed;
}

}  // namespace

BackwardPlan plan_backward(const Problem& p) {
  BackwardPlan plan;
  plan.path = choose_block_path(p);
  UnitPolicy policy;  // one tile per unit, stage 05's groups
  policy.token_group = s05::kGroupTokenBlocks;
  plan.units = plan_tile_units(p, plan.path, policy);
  return plan;
}

std::vector<MemoryItem> backward_scratch(const Problem& p) {
  std::vector<MemoryItem> items;
  if (p.dtype == Dtype::kBFloat16) {
    items.push_back({"dE fp32 accumulator", static_cast<size_t>(p.n * p.d) * 4});
    items.push_back({"dC fp32 accumulator", static_cast<size_t>(p.v * p.d) * 4});
  }
  items.push_back({"per-token grad scale", static_cast<size_t>(p.n) * 4});
  return items;
}

Accumulators prepare_backward(const DeviceInputs& in, const float* upstream, const Scratch& scratch, void* de,
                              void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  Accumulators acc;
  acc.de = bf16 ? scratch.get<float>("dE fp32 accumulator") : static_cast<float*>(de);
  acc.dc = bf16 ? scratch.get<float>("dC fp32 accumulator") : static_cast<float*>(dc);
  float* grad_scale = scratch.get<float>("per-token grad scale");
  acc.grad_scale = grad_scale;
  CCE_CUDA_CHECK(cudaMemsetAsync(acc.de, 0, p.n * p.d * sizeof(float), stream));
  CCE_CUDA_CHECK(cudaMemsetAsync(acc.dc, 0, p.v * p.d * sizeof(float), stream));
  compute_token_grad_scale(p, in.targets.get(), upstream, grad_scale, stream);
  return acc;
}

void cast_to_bf16(const float* src, void* dst, int64_t count, cudaStream_t stream) {
  constexpr int kThreads = 256;
  if (count == 0) return;
  const bool aligned = reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 8 == 0;
  if (aligned && count % 4 == 0) {
    const int64_t count4 = count / 4;
    cast4_bf16_kernel<<<static_cast<unsigned>((count4 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(src), static_cast<uint2*>(dst), count4);
    CCE_CHECK_LAUNCH();
    return;
  }
  cast_kernel<__nv_bfloat16><<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      src, static_cast<__nv_bfloat16*>(dst), count);
  CCE_CHECK_LAUNCH();
}

void finish_backward(const DeviceInputs& in, const Accumulators& acc, void* de, void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  if (p.dtype != Dtype::kBFloat16) return;
  cast_to_bf16(acc.de, de, p.n * p.d, stream);
  cast_to_bf16(acc.dc, dc, p.v * p.d, stream);
}

void backward(const DeviceInputs& in, Scratch& scratch, const float* lse, const float* upstream, void* de, void* dc,
              cudaStream_t stream) {
  const Problem& p = in.problem;
  const BackwardPlan plan = plan_backward(p);
  scratch.allocate(backward_scratch(p));
  const Accumulators acc = prepare_backward(in, upstream, scratch, de, dc, stream);
  dispatch_block_path(plan.path, [&](auto tile, auto element, auto aligned) {
    using Tile = decltype(tile);
    using T = decltype(element);
    launch_tile_backward<Tile, T>(fused_backward_kernel<Tile, T, decltype(aligned)::value>, plan.units, stream,
                                  reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()),
                                  in.targets.get(), lse, acc.grad_scale, p.n, p.d, p.v, p.softcap, plan.units, acc.de,
                                  acc.dc);
  });
  finish_backward(in, acc, de, dc, stream);
}

std::vector<std::string> report_backward_plan(const Problem& p) {
  const BackwardPlan plan = plan_backward(p);
  char buf[200];
  std::snprintf(buf, sizeof buf, "backward     %lld token blocks x %lld vocabulary tiles, a block each; %s",
                static_cast<long long>(plan.units.token_blocks), static_cast<long long>(plan.units.vocab_tiles),
                to_string(plan.path));
  std::vector<std::string> lines = s05::report_locked_plan(p);
  lines.push_back(buf);
  return lines;
}

std::vector<MemoryItem> workspace(const Problem& p, bool with_backward) {
  return with_backward ? concat(s05::forward_scratch(p), backward_scratch(p)) : s05::forward_scratch(p);
}

std::unique_ptr<Stage> make_stage() {
  return make_stage_from({"06_fused_backward", "fused backward: dE and dC from recomputed logits tiles", workspace,
                          s05::forward, backward, report_backward_plan});
}

}  // namespace cce::s06
