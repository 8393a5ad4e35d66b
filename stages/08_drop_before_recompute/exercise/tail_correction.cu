// Exercise 08_drop_before_recompute (README.md beside this file): generated from ../tail_correction.cu by
// scripts/exercise.py; write the EXERCISE blocks.
#include "common/exercise.h"
// Stage 08's tail correction: what the dropped tiles would have added to dE,
// approximated by their softmax mass times the mean row of C over the tile,
//   dE_i ≈ Σ_{T dropped for i} g_i M_iT C̄_T,   M_iT = s_iT·exp(m_iT − LSE_i) − [t_i ∈ T]·p_{i,t_i},
// as one GEMM [N, tiles] × [tiles, D], and dC's G_T = Σ_i g_i M_iT E_i as a
// second (README.md derives both and bounds what they leave).
// M is written over the tile statistics (they are not needed after it), so
// that it costs no memory of its own; C̄ was summed by the forward's gather.
#include <algorithm>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/dependent_launch.cuh"
#include "common/device_math.cuh"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"
#include "stages/08_drop_before_recompute/tile_stats.cuh"

namespace cce::s08 {
namespace {

// In place over the statistics of one tile (a block per tile): stats[T][i]
// (4 bytes) becomes M[T][i] (the dtype's bytes) at element i of a row of
// stats_bytes / element bytes elements. The block walks the row in pieces of
// kTailRowsPerThread rows a thread, reading a piece before it writes: a write
// at element i of a bf16 row covers the statistics of entries i/2 .. which the
// block has read already. Several rows a thread keep that many loads in flight,
// and blocks of 1024 threads keep every SM full when there are few tiles (at
// V = 32000, 250 blocks for 132 SMs).
constexpr int kTailThreads = 1024, kTailRowsPerThread = 4;
template <typename T>
__global__ void __launch_bounds__(kTailThreads) tail_mass_kernel(uint32_t* __restrict__ stats, const float* __restrict__ lse,
                                 const float* __restrict__ grad_scale, const float* __restrict__ target_logit,
                                 const int64_t* __restrict__ position, const uint8_t* __restrict__ flags,
                                 const int* __restrict__ token_place, int64_t n, int64_t token_blocks,
                                 int64_t tile_rows, int64_t tile_cols, float softcap) {
  wait_for_kernel_ahead();
  const int64_t tile = blockIdx.x;
  uint32_t* row_stats = stats + tile * n;
  T* mass = reinterpret_cast<T*>(row_stats);
  for (int64_t first = 0; first < n; first += kTailRowsPerThread * blockDim.x) {
    float piece[kTailRowsPerThread];
#pragma unroll
    for (int j = 0; j < kTailRowsPerThread; ++j) {
      const int64_t i = first + j * blockDim.x + threadIdx.x;
      float m = 0.0f;
      if (i < n) {
        const uint32_t packed = row_stats[i];
        const int64_t place = token_place != nullptr ? token_place[i] : i;
        // 32-bit: N < 2^31 (Problem::validate), and a 64-bit division would cost dozens of instructions an entry.
        const bool kept = flags[tile * token_blocks + static_cast<int>(place) / static_cast<int>(tile_rows)] != 0;
        // EXERCISE(the tail correction): m = g·(the dropped softmax mass − the target's)·softcap'
        CCE_EXERCISE_MISSING("08_drop_before_recompute", "the tail correction");
        // END EXERCISE
      }
      piece[j] = m;
    }
    __syncthreads();  // the whole piece is read before any of it is overwritten
#pragma unroll
    for (int j = 0; j < kTailRowsPerThread; ++j) {
      const int64_t i = first + j * blockDim.x + threadIdx.x;
      if (i < n) mass[i] = from_float<T>(piece[j]);
    }
    __syncthreads();
  }
}

}  // namespace

void correct_dropped_tail(const DeviceInputs& in, const TileGrid& grid, const DecisionInputs& inputs,
                          const uint8_t* keep, float* de_acc, const TailSums& tail, cudaStream_t stream) {
  const Problem& p = in.problem;
  const TileStatistics& forward = *inputs.forward;
  dispatch_dtype(p.dtype, [&](auto element_type) {
    using T = decltype(element_type);
    launch_dependent(tail_mass_kernel<T>, static_cast<unsigned>(grid.tiles), kTailThreads, stream,
        forward.stats, inputs.lse, inputs.grad_scale, forward.target_logit, forward.target_position, keep,
        inputs.blocks.token_place, p.n, grid.token_blocks, grid.tile_rows, grid.tile_cols, p.softcap);
  });

  // Row-major dE [N, D] is column-major D×N: dEᵀ = C̄ᵀ (D×tiles, ld D) · Mᵀ, with
  // M stored tile-major (column-major N×tiles, ld = N·4 bytes / element bytes).
  const cudaDataType type = p.dtype == Dtype::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
  const int64_t mass_ld = p.n * 4 / static_cast<int64_t>(p.element_bytes());
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t handle = cublas_handle_on(stream);
  const cublasStatus_t status = cublasGemmEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(p.d), static_cast<int>(p.n), static_cast<int>(grid.tiles),
      &one, forward.tile_means, type, static_cast<int>(p.d), forward.stats, type, static_cast<int>(mass_ld), &zero,
      de_acc, CUDA_R_32F, static_cast<int>(p.d), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError("stage 08: cublasGemmEx (tail correction) failed with status " + std::to_string(static_cast<int>(status)));
  if (tail.sums == nullptr) return;

  // dC: G_T = Σ_i M_iT E_i, i.e. as column-major Gᵀ (D×tiles) = Eᵀ (D×N, ld D) · M (N×tiles).
  const cublasStatus_t dc_status = cublasGemmEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(p.d), static_cast<int>(grid.tiles), static_cast<int>(p.n),
      &one, in.e.get(), type, static_cast<int>(p.d), forward.stats, type, static_cast<int>(mass_ld), &zero, tail.sums,
      CUDA_R_32F, static_cast<int>(tail.ld), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (dc_status != CUBLAS_STATUS_SUCCESS)
    throw CudaError("stage 08: cublasGemmEx (dC tail sums) failed with status " +
                    std::to_string(static_cast<int>(dc_status)));
}

}  // namespace cce::s08
