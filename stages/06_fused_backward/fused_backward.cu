#include "stages/06_fused_backward/fused_backward.h"

#include <cstdio>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/tile_dispatch.cuh"
#include "stages/05_lse_locks/grouped_order.cuh"
#include "stages/06_fused_backward/backward_products.cuh"

namespace cce::s06 {
namespace {

template <class Tile, typename T>
struct BackwardShared {
  using Products = typename BackwardProductsFor<T>::type;
  static_assert(Products::kBM == Tile::kBM && Products::kBN == Tile::kBN, "tile shapes must agree");
  // The tile product's buffers are free once the tile is computed: the
  // products reuse them. Per-row LSE, g and target follow.
  static constexpr size_t kWork = Tile::kSharedBytes > Products::kSharedBytes ? Tile::kSharedBytes : Products::kSharedBytes;
  static constexpr size_t kBytes = kWork + static_cast<size_t>(Tile::kBM) * 12;
};

template <class Tile, typename T, bool kAligned>
__global__ void __launch_bounds__(256, 1)
    fused_backward_kernel(const T* __restrict__ e, const T* __restrict__ c, const int64_t* __restrict__ targets,
                          const float* __restrict__ lse, const float* __restrict__ grad_scale, int64_t n, int64_t d,
                          int64_t v, float softcap, int64_t token_blocks, int64_t vocab_blocks, float filter_eps,
                          const int* __restrict__ vocab_order, float* __restrict__ de_acc, float* __restrict__ dc_acc,
                          unsigned long long* __restrict__ kept_tiles) {
  using Products = typename BackwardProductsFor<T>::type;
  using Layout = BackwardShared<Tile, T>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  float* row_lse = reinterpret_cast<float*>(shared_bytes + Layout::kWork);
  float* row_g = row_lse + Tile::kBM;
  int* row_target = reinterpret_cast<int*>(row_g + Tile::kBM);

  int64_t token_block, vocab_block;
  grouped_block(blockIdx.x, token_blocks, vocab_blocks, 8, &token_block, &vocab_block);
  const int64_t row0 = token_block * Tile::kBM, col0 = vocab_block * Tile::kBN;
  for (int i = threadIdx.x; i < Tile::kBM; i += blockDim.x) {
    const bool in_range = row0 + i < n;
    row_lse[i] = in_range ? lse[row0 + i] : 0.0f;
    row_g[i] = in_range ? grad_scale[row0 + i] : 0.0f;  // 0 for ignored tokens and past N
    row_target[i] = in_range ? static_cast<int>(targets[row0 + i]) : -1;
  }
  // A token block whose tokens are all ignored has S = 0: nothing to add.
  bool any_gradient = false;
  for (int i = threadIdx.x; i < Tile::kBM; i += blockDim.x) any_gradient |= row_g[i] != 0.0f;
  if (!__syncthreads_or(any_gradient)) return;

  Tile tile;
  tile.b_order = vocab_order;
  tile.template for_each_tile<kAligned>(e, n, row0, c, v, vocab_block, vocab_block + 1, d, shared_bytes,
                                        [](int64_t) {});
  // The tile is in the accumulators and the tile's shared memory is free.
  Products products(shared_bytes);
  bool keep = filter_eps <= 0.0f;
#pragma unroll
  for (int r = 0; r < Tile::kRows; ++r) {
    const int tr = Tile::row_of(r);
#pragma unroll
    for (int cc = 0; cc < Tile::kCols; ++cc) {
      const int tc = Tile::col_of(cc);
      const int64_t position = col0 + tc;
      float s = 0.0f;
      if (position < v && row_g[tr] != 0.0f) {
        const int64_t vocab = vocab_order != nullptr ? vocab_order[position] : position;
        const float z = apply_softcap(tile.z(r, cc), softcap);
        const float p = __expf(z - row_lse[tr]);
        // Filtering looks at the gradient before the upstream scale g_i
        // (1/N for mean), so that eps means the same at every batch size.
        const float unscaled = (p - (vocab == row_target[tr] ? 1.0f : 0.0f)) * softcap_derivative(z, softcap);
        keep |= fabsf(unscaled) >= filter_eps;
        s = row_g[tr] * unscaled;
      }
      products.store_s(tr, tc, s);
    }
  }
  if (!__syncthreads_or(keep)) return;  // also publishes S
  if (threadIdx.x == 0) atomicAdd(kept_tiles, 1ull);
  products.template run<kAligned>(e, c, n, v, d, row0, col0, vocab_order, de_acc, dc_acc);
}

template <typename T>
__global__ void cast_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) dst[i] = from_float<T>(src[i]);
}

}  // namespace

std::vector<MemoryItem> backward_workspace(const Problem& p) {
  std::vector<MemoryItem> items;
  if (p.dtype == Dtype::kBFloat16) {
    items.push_back({"dE fp32 accumulator", static_cast<size_t>(p.n * p.d) * 4});
    items.push_back({"dC fp32 accumulator", static_cast<size_t>(p.v * p.d) * 4});
  }
  items.push_back({"per-token grad scale", static_cast<size_t>(p.n) * 4});
  items.push_back({"kept-tile counter", sizeof(unsigned long long)});
  return items;
}

void FusedBackwardRunner::run(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                              const BackwardOptions& options, cudaStream_t stream) {
  const Problem& p = in.problem;
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  if (grad_scale_.size() != static_cast<size_t>(p.n)) grad_scale_ = DeviceBuffer<float>(p.n);
  if (!kept_.get()) kept_ = DeviceBuffer<unsigned long long>(1);
  if (bf16 && de_acc_.size() != static_cast<size_t>(p.n * p.d)) de_acc_ = DeviceBuffer<float>(p.n * p.d);
  if (bf16 && dc_acc_.size() != static_cast<size_t>(p.v * p.d)) dc_acc_ = DeviceBuffer<float>(p.v * p.d);
  float* de_acc = bf16 ? de_acc_.get() : static_cast<float*>(de);
  float* dc_acc = bf16 ? dc_acc_.get() : static_cast<float*>(dc);
  CCE_CUDA_CHECK(cudaMemsetAsync(de_acc, 0, p.n * p.d * sizeof(float), stream));
  CCE_CUDA_CHECK(cudaMemsetAsync(dc_acc, 0, p.v * p.d * sizeof(float), stream));
  CCE_CUDA_CHECK(cudaMemsetAsync(kept_.get(), 0, sizeof(unsigned long long), stream));
  compute_token_grad_scale(p, in.targets.get(), upstream, grad_scale_.get(), stream);

  const TilePath path = choose_tile_path(p, true);
  dispatch_tile_path(path, [&](auto tile, auto zero, auto aligned) {
    using Tile = decltype(tile);
    using T = decltype(zero);
    const int64_t token_blocks = (p.n + Tile::kBM - 1) / Tile::kBM;
    const int64_t vocab_blocks = (p.v + Tile::kBN - 1) / Tile::kBN;
    tiles_ = token_blocks * vocab_blocks;
    auto kernel = fused_backward_kernel<Tile, T, decltype(aligned)::value>;
    const size_t shared = BackwardShared<Tile, T>::kBytes;
    CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    kernel<<<static_cast<unsigned>(tiles_), Tile::kThreads, shared, stream>>>(
        reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()), in.targets.get(), lse,
        grad_scale_.get(), p.n, p.d, p.v, p.softcap, token_blocks, vocab_blocks, options.filter_eps,
        options.vocab_order, de_acc, dc_acc,
        kept_.get());
    CCE_CHECK_LAUNCH();
  });
  if (bf16) {
    constexpr int kThreads = 256;
    auto cast = [&](const float* src, void* dst, int64_t count) {
      cast_kernel<__nv_bfloat16><<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
          src, static_cast<__nv_bfloat16*>(dst), count);
      CCE_CHECK_LAUNCH();
    };
    cast(de_acc, de, p.n * p.d);
    cast(dc_acc, dc, p.v * p.d);
  }
}

BackwardStats FusedBackwardRunner::stats() const {
  BackwardStats s;
  s.tiles = tiles_;
  if (kept_.get()) {
    unsigned long long kept = 0;
    copy_to_host(&kept, kept_.get(), sizeof kept);
    s.kept_tiles = static_cast<int64_t>(kept);
  }
  return s;
}

void FusedBackwardRunner::release() {
  de_acc_.reset();
  dc_acc_.reset();
  grad_scale_.reset();
  kept_.reset();
}

std::vector<MemoryItem> FusedBackwardStage::workspace(const Problem& p, bool backward) const {
  std::vector<MemoryItem> items = forward_stage_.workspace(p, false);
  if (backward)
    for (auto& item : backward_workspace(p)) items.push_back(item);
  return items;
}

void FusedBackwardStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  forward_stage_.forward(in, loss, lse, stream);
}

void FusedBackwardStage::backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                                  cudaStream_t stream) {
  backward_.run(in, lse, upstream, de, dc, BackwardOptions{}, stream);
}

std::vector<std::string> FusedBackwardStage::report_lines() const {
  std::vector<std::string> lines = forward_stage_.report_lines();
  const BackwardStats s = backward_.stats();
  if (s.tiles > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "backward     %lld tiles, %lld ran the two products (%.1f%%; all-ignored token blocks skip)",
                  static_cast<long long>(s.tiles), static_cast<long long>(s.kept_tiles),
                  100.0 * static_cast<double>(s.kept_tiles) / static_cast<double>(s.tiles));
    lines.push_back(buf);
  }
  return lines;
}

void FusedBackwardStage::release_workspace() {
  forward_stage_.release_workspace();
  backward_.release();
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<FusedBackwardStage>(); }

}  // namespace cce::s06
