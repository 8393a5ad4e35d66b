// The dense plan: when most tiles would be kept, recomputing them one by one
// costs more than recomputing everything with cuBLAS. The vocabulary is cut
// into slabs of columns; per slab, three GEMMs and one pass over the slab:
//   Z = E·C_slabᵀ (fp32), S = g·(p − onehot)·softcap' in place (bf16, packed
//   into the first half of each fp32 row), dE += S·C_slab (fp32 accumulator),
//   dC_slab = Sᵀ·E.
// The LSE is the forward's, so every sum is over one slab's columns in
// cuBLAS's fixed order: deterministic, and exact up to the arithmetic of
// stage 01's backward (fp32 logits, S rounded once).
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/device_math.cuh"
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

std::vector<MemoryItem> dense_slab_items(const Problem& p, const DenseSlabs& slabs) {
  return {{kDenseSlabItem, static_cast<size_t>(p.n * slabs.pitch) * 4}};
}

void dense_backward(const DeviceInputs& in, const DenseSlabs& slabs, float* slab, const float* lse,
                    const float* grad_scale, float* de_acc, void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  const bool bf16 = p.dtype == Dtype::kBFloat16;
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
    // dE [N, D] (column-major [D, N]) += C_slabᵀ [D, columns] · Sᵀ [columns, N], in fp32.
    const float* beta = index == 0 ? &zero : &one;
    CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, n, columns, &one, c_slab, type, d, slab, type,
                                  s_pitch, beta, de_acc, CUDA_R_32F, d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    // dC_slab [columns, D] (column-major [D, columns]) = Eᵀ [D, N] · S [N, columns]; none for a frozen classifier.
    if (dc != nullptr) {
      void* dc_slab = static_cast<unsigned char*>(dc) + first * p.d * element;
      CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, d, columns, n, &one, in.e.get(), type, d, slab,
                                    type, s_pitch, &zero, dc_slab, type, d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    // END EXERCISE
  }
}

}  // namespace cce::s10
