#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"

#include <algorithm>
#include <cstdio>

#include "common/check.h"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/fused_ce.cuh"

namespace cce::s03 {
namespace {

// Grid: (token block, vocabulary range). Each block leaves, per row, the
// (max, sum) of its range in partial[range·N + row].
template <typename T, bool kAligned>
__global__ void __launch_bounds__(256, 2) fused_lse_kernel(const T* __restrict__ e, const T* __restrict__ c,
                                                        const int64_t* __restrict__ targets, int64_t n, int64_t d,
                                                        int64_t v, float softcap, int64_t tiles_per_split,
                                                        float2* __restrict__ partial,
                                                        float* __restrict__ target_logit) {
  using Tile = typename TileProductFor<T>::type;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* tile_smem = reinterpret_cast<T*>(shared_bytes);
  RowStates<Tile> states(shared_bytes + Tile::kSharedBytes);

  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * Tile::kBM;
  const int64_t vocab_tiles = (v + Tile::kBN - 1) / Tile::kBN;
  const int64_t tile_begin = blockIdx.y * tiles_per_split;
  const int64_t tile_end = min(vocab_tiles, tile_begin + tiles_per_split);
  states.init(target_logit != nullptr ? targets : nullptr, row0, n);

  Tile tile;
  tile.template for_each_tile<kAligned>(e, n, row0, c, v, tile_begin, tile_end, d, tile_smem, [&](int64_t col0) {
    fold_tile_into_rows(tile, states, row0, col0, v, softcap, target_logit);
  });
  const OnlineSoftmax row_state = merge_row_states(states);
  const int64_t row = row0 + threadIdx.x;
  if (threadIdx.x < Tile::kBM && row < n) partial[blockIdx.y * n + row] = make_float2(row_state.max, row_state.sum);
}

// One thread per row: merge the S range states into the LSE; loss = LSE − z_t.
__global__ void merge_splits_kernel(const float2* __restrict__ partial, const float* __restrict__ target_logit,
                                    const int64_t* __restrict__ targets, int64_t n, int64_t splits,
                                    int64_t ignore_index, float* __restrict__ lse, float* __restrict__ loss_per_token) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= n) return;
  OnlineSoftmax state;
  for (int64_t s = 0; s < splits; ++s) {
    const float2 p = partial[s * n + row];
    state.merge(OnlineSoftmax{p.x, p.y});
  }
  const float row_lse = state.lse();
  lse[row] = row_lse;
  if (loss_per_token != nullptr)
    loss_per_token[row] = targets[row] == ignore_index ? 0.0f : row_lse - target_logit[row];
}

template <typename T, bool kAligned>
int blocks_per_sm() {
  using Tile = typename TileProductFor<T>::type;
  auto kernel = fused_lse_kernel<T, kAligned>;
  CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(Tile::kSharedBytes + RowStates<Tile>::kSharedBytes)));
  int blocks = 0;
  CCE_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, Tile::kThreads,
                                                    Tile::kSharedBytes + RowStates<Tile>::kSharedBytes));
  return std::max(blocks, 1);
}

}  // namespace

VocabSplit plan_vocab_split(const Problem& p) {
  // Without a device (the tour's memory table on a CPU-only machine) the plan
  // assumes an H100: 132 multiprocessors, 2 resident blocks each.
  const bool have_device = cuda_device_available();
  int device = 0, sms = 132;
  if (have_device) {
    CCE_CUDA_CHECK(cudaGetDevice(&device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  }
  VocabSplit s;
  int resident = 0;
  dispatch_dtype(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    using Tile = typename TileProductFor<T>::type;
    s.token_blocks = (p.n + Tile::kBM - 1) / Tile::kBM;
    s.vocab_tiles = (p.v + Tile::kBN - 1) / Tile::kBN;
    resident = sms * (have_device ? blocks_per_sm<T, true>() : 2);
  });
  // As many vocabulary ranges as fill one wave of resident blocks: more would
  // leave a partial second wave, fewer would leave multiprocessors idle.
  s.splits = std::clamp<int64_t>(resident / s.token_blocks, 1, s.vocab_tiles);
  s.tiles_per_split = (s.vocab_tiles + s.splits - 1) / s.splits;
  s.splits = (s.vocab_tiles + s.tiles_per_split - 1) / s.tiles_per_split;  // no empty range
  return s;
}

void fused_lse_and_loss(const DeviceInputs& in, const VocabSplit& split, float2* partial, float* target_logit,
                        float* lse, float* loss_per_token, cudaStream_t stream) {
  const Problem& p = in.problem;
  dispatch_dtype(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    using Tile = typename TileProductFor<T>::type;
    const T* e = reinterpret_cast<const T*>(in.e.get());
    const T* c = reinterpret_cast<const T*>(in.c.get());
    // 16-byte copies need 16-byte aligned rows: D a multiple of 8 bf16.
    const bool aligned = sizeof(T) == 2 && p.d % 8 == 0;
    auto kernel = aligned ? fused_lse_kernel<T, true> : fused_lse_kernel<T, false>;
    const size_t shared = Tile::kSharedBytes + RowStates<Tile>::kSharedBytes;
    CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    const dim3 grid(static_cast<unsigned>(split.token_blocks), static_cast<unsigned>(split.splits));
    kernel<<<grid, Tile::kThreads, shared, stream>>>(e, c, in.targets.get(), p.n, p.d, p.v, p.softcap,
                                                                 split.tiles_per_split, partial, target_logit);
    CCE_CHECK_LAUNCH();
  });
  constexpr int kThreads = 256;
  merge_splits_kernel<<<static_cast<unsigned>((p.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      partial, target_logit, in.targets.get(), p.n, split.splits, p.ignore_index, lse, loss_per_token);
  CCE_CHECK_LAUNCH();
}

std::vector<MemoryItem> FusedGemmCeStage::workspace(const Problem& p, bool) const {
  const VocabSplit s = plan_vocab_split(p);
  std::vector<MemoryItem> items = {{"range (max, sum) S*N", static_cast<size_t>(s.splits * p.n) * sizeof(float2)},
                                   {"target logit", static_cast<size_t>(p.n) * 4}};
  if (p.reduction != Reduction::kNone) items.push_back({"per-token loss", static_cast<size_t>(p.n) * 4});
  return items;
}

void FusedGemmCeStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  split_ = plan_vocab_split(p);
  if (partial_.size() != static_cast<size_t>(split_.splits * p.n)) partial_ = DeviceBuffer<float2>(split_.splits * p.n);
  if (target_logit_.size() != static_cast<size_t>(p.n)) target_logit_ = DeviceBuffer<float>(p.n);
  const bool reduce = p.reduction != Reduction::kNone;
  if (reduce && loss_per_token_.size() != static_cast<size_t>(p.n)) loss_per_token_ = DeviceBuffer<float>(p.n);
  float* per_token = reduce ? loss_per_token_.get() : loss;
  fused_lse_and_loss(in, split_, partial_.get(), target_logit_.get(), lse, per_token, stream);
  if (reduce) reduce_token_losses(p, per_token, in.targets.get(), loss, stream);
}

void FusedGemmCeStage::backward(const DeviceInputs&, const float*, const float*, void*, void*, cudaStream_t) {
  throw InputError("stage 03 computes the forward only; the fused backward comes in stage 06");
}

std::vector<std::string> FusedGemmCeStage::report_lines() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "grid         %lld token blocks x %lld vocabulary ranges of %lld tiles",
                static_cast<long long>(split_.token_blocks), static_cast<long long>(split_.splits),
                static_cast<long long>(split_.tiles_per_split));
  return {buf};
}

void FusedGemmCeStage::release_workspace() {
  partial_.reset();
  target_logit_.reset();
  loss_per_token_.reset();
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<FusedGemmCeStage>(); }

}  // namespace cce::s03
