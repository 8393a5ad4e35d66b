// Exercise 10_plan_per_batch (README.md beside this file): generated from ../dense_backward.cu by
// scripts/exercise.py; write the EXERCISE blocks.
#include "common/exercise.h"
// The dense plan: when most tiles would be kept, recomputing them one by one
// costs more than recomputing everything with cuBLAS. Two ways, by whether
// the forward has run.
//
// After the forward (dense_backward), the LSE is known: the vocabulary is cut
// into slabs of columns; per slab, three GEMMs and one pass over the slab:
//   Z = E·C_slabᵀ (fp32), S = g·(p − onehot)·softcap' in place (bf16, packed
//   into the first half of each fp32 row), dE += S·C_slab (fp32 accumulator),
//   dC_slab = Sᵀ·E.
// Four GEMMs with the forward's.
//
// Before the forward (dense_loss_and_gradient), planned from the previous
// batch: the rows are cut into chunks, and a chunk's logits are the whole
// rows, so its LSE comes with them: stage 03's forward, whose epilogue here
// also keeps each tile in an fp32 buffer (KeepTileThenFold). S follows in
// place (the slabs' kernel on a slab of every column); then dE's rows = S·C
// and dC += Sᵀ·E_rows. Three GEMMs. dC sums over the chunks (fp32 for bf16),
// which the slabs avoid.
//
// Every sum runs in a fixed order (cuBLAS's, stage 03's): deterministic, and
// exact up to the arithmetic of stage 01's backward (fp32 logits, S rounded
// once). cuBLAS writes every gradient product in fp32; a bf16 dE or dC is
// rounded from it once, here.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/device_math.cuh"
#include "common/tile/launch.cuh"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/split_lse.cuh"
#include "stages/06_fused_backward/fused_backward.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce::s10 {
namespace {

constexpr int kSlabThreads = 256;
constexpr int64_t kSlabColumnMultiple = 256;
constexpr int64_t kSlabPitchMultiple = 64;  // floats: 256-byte aligned rows for cuBLAS and float4 loads

__device__ __forceinline__ float slab_gradient(float logit, int64_t j, int64_t target, float row_lse, float g,
                                               float softcap) {
  const float z = apply_softcap(logit, softcap);
  return g * (__expf(z - row_lse) - (j == target ? 1.0f : 0.0f)) * softcap_derivative(z, softcap);
}

// One block per row of the slab. kPackBf16: S_ij lands at bf16 index j of the
// row's own storage; each chunk of 4·blockDim floats is read by every thread
// before the barrier and written after it, and its bf16 values only cover
// bytes this or an earlier chunk has read (stage 01's packing, four at once).
template <bool kPackBf16>
__global__ void slab_gradient_kernel(float* __restrict__ slab, int64_t pitch, int64_t columns, int64_t first_column,
                                     const int64_t* __restrict__ targets, const float* __restrict__ lse,
                                     const float* __restrict__ grad_scale, float softcap) {
  const int64_t row = blockIdx.x;
  const float g = grad_scale[row], row_lse = lse[row];
  const int64_t target = targets[row] - first_column;  // outside [0, columns) when not in this slab
  float* z_row = slab + row * pitch;
  __nv_bfloat16* out_row = reinterpret_cast<__nv_bfloat16*>(z_row);
  for (int64_t chunk = 0; chunk < columns; chunk += 4 * blockDim.x) {
    const int64_t j = chunk + 4 * threadIdx.x;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (j + 3 < columns) {
      const float4 z = *reinterpret_cast<const float4*>(z_row + j);
      s[0] = slab_gradient(z.x, j, target, row_lse, g, softcap);
      s[1] = slab_gradient(z.y, j + 1, target, row_lse, g, softcap);
      s[2] = slab_gradient(z.z, j + 2, target, row_lse, g, softcap);
      s[3] = slab_gradient(z.w, j + 3, target, row_lse, g, softcap);
    } else {
      for (int k = 0; k < 4 && j + k < columns; ++k) s[k] = slab_gradient(z_row[j + k], j + k, target, row_lse, g, softcap);
    }
    if constexpr (kPackBf16) {
      __syncthreads();
      if (j + 3 < columns) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(s[0], s[1]), hi = __floats2bfloat162_rn(s[2], s[3]);
        uint2 packed;
        packed.x = *reinterpret_cast<const unsigned*>(&lo);
        packed.y = *reinterpret_cast<const unsigned*>(&hi);
        *reinterpret_cast<uint2*>(out_row + j) = packed;  // 8-byte aligned: pitch and j are multiples of 4
      } else {
        for (int k = 0; k < 4 && j + k < columns; ++k) out_row[j + k] = __float2bfloat16(s[k]);
      }
    } else {
      for (int k = 0; k < 4 && j + k < columns; ++k) z_row[j + k] = s[k];
    }
  }
}

// Stage 03's forward epilogue, after the tile is kept: each logit of the
// tile goes to the chunk's fp32 buffer (row pitch `pitch`) before the fold
// softcaps it. So one pass of the engine leaves both the logits and the LSE,
// where cuBLAS would leave the logits and a row pass read them again.
struct KeepTileParams {
  s03::SplitLseParams lse;
  float* logits;
  int64_t pitch;  // a multiple of 4 floats
};

template <class Frag>
struct KeepTileThenFold {
  using Params = KeepTileParams;
  static constexpr size_t kSharedBytes = s03::SplitLseEpilogue<Frag>::kSharedBytes;
  s03::SplitLseEpilogue<Frag> fold;
  float* logits;
  int64_t pitch;

  __device__ KeepTileThenFold(const Params& params, unsigned char* shared)
      : fold(params.lse, shared), logits(params.logits), pitch(params.pitch) {}
  __device__ void begin(const Unit& unit) { fold.begin(unit); }
  __device__ void tile(Frag& frag, const Unit& unit, int64_t col0) {
    const int64_t row0 = unit.token_block * Frag::kBM, n = fold.p.n, v = fold.p.v;
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r) {
      const int64_t row = row0 + Frag::row_of(r);
      if (row >= n) continue;
      float* out = logits + row * pitch + col0;
      if constexpr (Frag::kColumnsShareLaneMod4) {  // the m16n8 picture: z(r, c), z(r, c + 1) side by side
#pragma unroll
        for (int c = 0; c < Frag::kCols; c += 2) {
          const int col = Frag::col_of(c);
          if (col0 + col + 1 < v)
            *reinterpret_cast<float2*>(out + col) = make_float2(frag.z(r, c), frag.z(r, c + 1));
          else if (col0 + col < v)
            out[col] = frag.z(r, c);
        }
      } else {
#pragma unroll
        for (int c = 0; c < Frag::kCols; ++c)
          if (col0 + Frag::col_of(c) < v) out[Frag::col_of(c)] = frag.z(r, c);
      }
    }
    fold.tile(frag, unit, col0);
  }
  __device__ void end(const Unit& unit) { fold.end(unit); }
};

// bf16 gradients come from fp32 products rounded once by the plan itself
// (plan_per_batch.h says why, at dense_slab_items): dC's sum over the chunks
// in fp32, dE's rows too.
bool accumulates_dc_in_fp32(const Problem& p, bool with_dc) { return with_dc && p.dtype == Dtype::kBFloat16; }

int to_int(int64_t x) { return static_cast<int>(x); }  // Problem::validate keeps N, D, V below 2^31

}  // namespace

DenseSlabs plan_dense_slabs(const Problem& p, int64_t columns) {
  if (columns <= 0) {
    const int64_t fit = static_cast<int64_t>(kDefaultDenseSlabBytes / (4 * static_cast<size_t>(std::max<int64_t>(p.n, 1))));
    columns = std::max(kSlabColumnMultiple, fit / kSlabColumnMultiple * kSlabColumnMultiple);
  }
  DenseSlabs slabs;
  slabs.columns = std::min(p.v, columns);
  slabs.pitch = (slabs.columns + kSlabPitchMultiple - 1) / kSlabPitchMultiple * kSlabPitchMultiple;
  slabs.count = (p.v + slabs.columns - 1) / slabs.columns;
  return slabs;
}

std::vector<MemoryItem> dense_slab_items(const Problem& p, const DenseSlabs& slabs, bool with_dc) {
  std::vector<MemoryItem> items = {{kDenseSlabItem, static_cast<size_t>(p.n * slabs.pitch) * 4}};
  if (accumulates_dc_in_fp32(p, with_dc)) items.push_back({kDenseDcSlabItem, static_cast<size_t>(slabs.columns * p.d) * 4});
  return items;
}

void dense_backward(const DeviceInputs& in, const DenseSlabs& slabs, const Scratch& scratch, const float* lse,
                    const float* grad_scale, float* de_acc, void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  float* slab = scratch.get<float>(kDenseSlabItem);
  float* dc_slab_fp32 = accumulates_dc_in_fp32(p, dc != nullptr) ? scratch.get<float>(kDenseDcSlabItem) : nullptr;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const size_t element = p.element_bytes();
  const int n = to_int(p.n), d = to_int(p.d);
  // S's pitch in its own elements: bf16 values packed into fp32 rows are twice as many per row.
  const int s_pitch = to_int(bf16 ? 2 * slabs.pitch : slabs.pitch);
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t handle = cublas_handle();
  CCE_CUBLAS_CHECK(cublasSetStream(handle, stream));
  for (int64_t first = 0, index = 0; first < p.v; first += slabs.columns, ++index) {
    const int columns = to_int(std::min(slabs.columns, p.v - first));
    const void* c_slab = static_cast<const unsigned char*>(in.c.get()) + first * p.d * element;
    // Row-major Z [N, columns] (rows of `pitch`) is column-major [columns, N] = C_slab·Eᵀ.
    CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, columns, n, d, &one, c_slab, type, d, in.e.get(),
                                  type, d, &zero, slab, CUDA_R_32F, to_int(slabs.pitch), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    if (bf16)
      slab_gradient_kernel<true><<<static_cast<unsigned>(p.n), kSlabThreads, 0, stream>>>(
          slab, slabs.pitch, columns, first, in.targets.get(), lse, grad_scale, p.softcap);
    else
      slab_gradient_kernel<false><<<static_cast<unsigned>(p.n), kSlabThreads, 0, stream>>>(
          slab, slabs.pitch, columns, first, in.targets.get(), lse, grad_scale, p.softcap);
    CCE_CHECK_LAUNCH();
    // EXERCISE(the slab's two gradient GEMMs): dE += S·C_slab, dC_slab = Sᵀ·E (cuBLAS: column-major)
    CCE_EXERCISE_MISSING("10_plan_per_batch", "the slab's two gradient GEMMs");
    // END EXERCISE
  }
}

DenseChunks plan_dense_chunks(const Problem& p, int64_t rows) {
  constexpr int64_t kRowMultiple = 128;
  if (rows <= 0) {
    const int64_t pitch = (std::max<int64_t>(p.v, 1) + kSlabPitchMultiple - 1) / kSlabPitchMultiple * kSlabPitchMultiple;
    const int64_t fit = static_cast<int64_t>(kDefaultDenseChunkBytes / (4 * static_cast<size_t>(pitch)));
    rows = std::max(kRowMultiple, fit / kRowMultiple * kRowMultiple);
  }
  DenseChunks chunks;
  chunks.rows = std::min(p.n, rows);
  chunks.count = chunks.rows > 0 ? (p.n + chunks.rows - 1) / chunks.rows : 0;
  chunks.pitch = (p.v + kSlabPitchMultiple - 1) / kSlabPitchMultiple * kSlabPitchMultiple;
  return chunks;
}

namespace {

// Stage 03's scratch for the largest of the chunks' plans (the last chunk may be shorter).
std::vector<MemoryItem> chunk_lse_items(const Problem& p, const DenseChunks& chunks) {
  std::vector<MemoryItem> items;
  if (chunks.count == 0) return items;
  for (const int64_t rows : {chunks.rows, p.n - (chunks.count - 1) * chunks.rows}) {
    const Problem part = p.with_tokens(rows);
    const std::vector<MemoryItem> these = s03::fused_lse_scratch(part, s03::plan_fused(part), true);
    if (items.empty()) items = these;
    for (size_t k = 0; k < items.size(); ++k) items[k].second = std::max(items[k].second, these[k].second);
  }
  return items;
}

}  // namespace

std::vector<MemoryItem> dense_chunk_items(const Problem& p, const DenseChunks& chunks, bool with_dc) {
  std::vector<MemoryItem> items = {{kDenseChunkItem, static_cast<size_t>(chunks.rows * chunks.pitch) * 4},
                                   {kDenseGradScaleItem, static_cast<size_t>(p.n) * 4}};
  items = concat(items, per_token_loss_scratch(p));
  items = concat(items, chunk_lse_items(p, chunks));
  if (p.dtype == Dtype::kBFloat16) items.push_back({kDenseDeRowsItem, static_cast<size_t>(chunks.rows * p.d) * 4});
  if (accumulates_dc_in_fp32(p, with_dc)) items.push_back({kDenseDcItem, static_cast<size_t>(p.v * p.d) * 4});
  return items;
}

void dense_loss_and_gradient(const DeviceInputs& in, const DenseChunks& chunks, const Scratch& scratch, float* loss,
                             float* lse, const float* upstream, void* de, void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const size_t element = p.element_bytes();
  const int d = to_int(p.d), v = to_int(p.v);
  float* logits = scratch.get<float>(kDenseChunkItem);
  float* grad_scale = scratch.get<float>(kDenseGradScaleItem);
  float* per_token = per_token_loss_buffer(p, loss, scratch);
  // dC's sum over the chunks and dE's rows in fp32: in dC and dE themselves (fp32), else beside them.
  float* dc_acc = accumulates_dc_in_fp32(p, dc != nullptr) ? scratch.get<float>(kDenseDcItem) : nullptr;
  void* dc_sum = dc_acc != nullptr ? static_cast<void*>(dc_acc) : dc;
  float* de_rows_fp32 = bf16 ? scratch.get<float>(kDenseDeRowsItem) : nullptr;
  compute_token_grad_scale(p, in.targets.get(), upstream, grad_scale, stream);
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t handle = cublas_handle();
  for (int64_t first = 0; first < p.n; first += chunks.rows) {
    // The chunk as a problem of its own rows: stage 03's forward runs on it unchanged, keeping its tiles.
    const Problem rows_problem = p.with_tokens(std::min(chunks.rows, p.n - first));
    const void* e_rows = static_cast<const unsigned char*>(in.e.get()) + first * p.d * element;
    const DeviceInputs rows = DeviceInputs::borrow(rows_problem, e_rows, in.c.get(), in.targets.get() + first);
    const s03::FusedPlan plan = s03::plan_fused(rows_problem);
    const KeepTileParams params{s03::split_lse_params(rows, scratch, true), logits, chunks.pitch};
    launch_tile_units<KeepTileThenFold>(rows, plan.path, plan.units, params, stream);
    s03::merge_ranges(rows, plan, params.lse, lse + first, per_token + first, stream);
    // The slabs' kernel, on a slab of every column: S in place (bf16: packed into the first half of each row).
    if (bf16)
      slab_gradient_kernel<true><<<static_cast<unsigned>(rows_problem.n), kSlabThreads, 0, stream>>>(
          logits, chunks.pitch, p.v, 0, rows.targets.get(), lse + first, grad_scale + first, p.softcap);
    else
      slab_gradient_kernel<false><<<static_cast<unsigned>(rows_problem.n), kSlabThreads, 0, stream>>>(
          logits, chunks.pitch, p.v, 0, rows.targets.get(), lse + first, grad_scale + first, p.softcap);
    CCE_CHECK_LAUNCH();
    const int s_pitch = to_int(bf16 ? 2 * chunks.pitch : chunks.pitch);
    const int n_rows = to_int(rows_problem.n);
    CCE_CUBLAS_CHECK(cublasSetStream(handle, stream));
    // dE's rows [n_rows, D] (column-major [D, n_rows]) = Cᵀ [D, V] · Sᵀ [V, n_rows], written once.
    void* de_rows = static_cast<unsigned char*>(de) + first * p.d * element;
    CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, n_rows, v, &one, in.c.get(), type, d, logits,
                                  type, s_pitch, &zero, bf16 ? static_cast<void*>(de_rows_fp32) : de_rows, CUDA_R_32F,
                                  d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (bf16) s06::cast_to_bf16(de_rows_fp32, de_rows, static_cast<int64_t>(n_rows) * p.d, stream);
    // dC [V, D] (column-major [D, V]) += E_rowsᵀ [D, n_rows] · S [n_rows, V]; none for a frozen classifier.
    if (dc != nullptr) {
      const float* beta = first == 0 ? &zero : &one;
      CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, d, v, n_rows, &one, e_rows, type, d, logits,
                                    type, s_pitch, beta, dc_sum, CUDA_R_32F, d, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    }
  }
  finish_loss(p, per_token, in.targets.get(), loss, stream);
  if (dc_acc != nullptr) s06::cast_to_bf16(dc_acc, dc, p.v * p.d, stream);
}

}  // namespace cce::s10
