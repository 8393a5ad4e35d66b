#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"

#include <algorithm>
#include <type_traits>
#include <cstdio>

#include "common/check.h"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/fused_ce.cuh"
#include "stages/03_fused_gemm_ce/tile_dispatch.cuh"

namespace cce::s03 {
namespace {

// Grid: (token block, vocabulary range). Each block leaves, per row, the
// (max, sum) of its range in partial[range·N + row].
template <class Tile, typename T, bool kAligned>
__global__ void __launch_bounds__(256, Tile::kMinBlocksPerSm) fused_lse_kernel(const T* __restrict__ e, const T* __restrict__ c,
                                                        const int64_t* __restrict__ targets, int64_t n, int64_t d,
                                                        int64_t v, float softcap, int64_t tiles_per_split,
                                                        float2* __restrict__ partial,
                                                        float* __restrict__ target_logit) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  RowStates<Tile> states(shared_bytes + Tile::kSharedBytes);

  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * Tile::kBM;
  const int64_t vocab_tiles = (v + Tile::kBN - 1) / Tile::kBN;
  const int64_t tile_begin = blockIdx.y * tiles_per_split;
  const int64_t tile_end = min(vocab_tiles, tile_begin + tiles_per_split);
  states.init(target_logit != nullptr ? targets : nullptr, row0, n);

  Tile tile;
  tile.template for_each_tile<kAligned>(e, n, row0, c, v, tile_begin, tile_end, d, shared_bytes, [&](int64_t col0) {
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

template <class Tile>
constexpr size_t kernel_shared_bytes() {
  return Tile::kSharedBytes + RowStates<Tile>::kSharedBytes;
}

template <class Tile, typename T, bool kAligned>
auto prepared_kernel() {
  auto kernel = fused_lse_kernel<Tile, T, kAligned>;
  CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kernel_shared_bytes<Tile>())));
  return kernel;
}

}  // namespace

VocabSplit plan_vocab_split(const Problem& p, int64_t splits) {
  // Without a device (the tour's memory table on a CPU-only machine) the plan
  // assumes an H100: 132 multiprocessors, 2 resident blocks each.
  const bool have_device = cuda_device_available();
  int device = 0, sms = 132, per_sm = 2;
  VocabSplit s;
  s.path = static_cast<int>(choose_tile_path(p, have_device));
  dispatch_tile_path(choose_tile_path(p, have_device), [&](auto tile, auto zero, auto aligned) {
    using Tile = decltype(tile);
    s.token_blocks = (p.n + Tile::kBM - 1) / Tile::kBM;
    s.vocab_tiles = (p.v + Tile::kBN - 1) / Tile::kBN;
    if (have_device) {
      CCE_CUDA_CHECK(cudaGetDevice(&device));
      CCE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      auto kernel = prepared_kernel<Tile, decltype(zero), decltype(aligned)::value>();
      CCE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Tile::kThreads,
                                                                   kernel_shared_bytes<Tile>()));
      per_sm = std::max(per_sm, 1);
    }
  });
  // As many vocabulary ranges as fill one wave of resident blocks: more would
  // leave a partial second wave, fewer would leave multiprocessors idle.
  const int64_t resident = static_cast<int64_t>(sms) * per_sm;
  s.splits = std::clamp<int64_t>(splits > 0 ? splits : resident / s.token_blocks, 1, s.vocab_tiles);
  s.tiles_per_split = (s.vocab_tiles + s.splits - 1) / s.splits;
  s.splits = (s.vocab_tiles + s.tiles_per_split - 1) / s.tiles_per_split;  // no empty range
  return s;
}

std::string describe_path(const VocabSplit& split) { return to_string(static_cast<TilePath>(split.path)); }

void fused_lse_and_loss(const DeviceInputs& in, const VocabSplit& split, float2* partial, float* target_logit,
                        float* lse, float* loss_per_token, cudaStream_t stream) {
  const Problem& p = in.problem;
  dispatch_tile_path(static_cast<TilePath>(split.path), [&](auto tile, auto zero, auto aligned) {
    using Tile = decltype(tile);
    using T = decltype(zero);
    auto kernel = prepared_kernel<Tile, T, decltype(aligned)::value>();
    const dim3 grid(static_cast<unsigned>(split.token_blocks), static_cast<unsigned>(split.splits));
    kernel<<<grid, Tile::kThreads, kernel_shared_bytes<Tile>(), stream>>>(
        reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()), in.targets.get(), p.n, p.d,
        p.v, p.softcap, split.tiles_per_split, partial, target_logit);
    CCE_CHECK_LAUNCH();
  });
  constexpr int kThreads = 256;
  merge_splits_kernel<<<static_cast<unsigned>((p.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      partial, target_logit, in.targets.get(), p.n, split.splits, p.ignore_index, lse, loss_per_token);
  CCE_CHECK_LAUNCH();
}

void FusedGemmCeStage::add_options(OptionParser& parser) {
  parser.add_int("vocab-splits", &requested_splits_,
                 "vocabulary ranges per token block: 0 = fill one wave of the GPU, 1 = plain 1D grid");
}

void FusedGemmCeStage::validate_options() const {
  if (requested_splits_ < 0) throw InputError("--vocab-splits must be >= 0");
}

std::vector<MemoryItem> FusedGemmCeStage::workspace(const Problem& p, bool) const {
  const VocabSplit s = plan_vocab_split(p, requested_splits_);
  std::vector<MemoryItem> items = {{"range (max, sum) S*N", static_cast<size_t>(s.splits * p.n) * sizeof(float2)},
                                   {"target logit", static_cast<size_t>(p.n) * 4}};
  if (p.reduction != Reduction::kNone) items.push_back({"per-token loss", static_cast<size_t>(p.n) * 4});
  return items;
}

void FusedGemmCeStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  split_ = plan_vocab_split(p, requested_splits_);
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
  std::snprintf(buf, sizeof buf, "grid         %lld token blocks x %lld vocabulary ranges of %lld tiles; %s",
                static_cast<long long>(split_.token_blocks), static_cast<long long>(split_.splits),
                static_cast<long long>(split_.tiles_per_split), describe_path(split_).c_str());
  return {buf};
}

void FusedGemmCeStage::release_workspace() {
  partial_.reset();
  target_logit_.reset();
  loss_per_token_.reset();
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<FusedGemmCeStage>(); }

}  // namespace cce::s03
