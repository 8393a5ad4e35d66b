// Exercise 01_materialized (README.md beside this file): generated from ../materialized.cu by
// scripts/exercise.py; write the EXERCISE blocks.
#include "common/exercise.h"
#include "stages/01_materialized/materialized.h"

#include <cuda_bf16.h>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/device_math.cuh"
#include "common/token_reduction.h"

namespace cce::s01 {
namespace {

constexpr int kRowThreads = 256;

cudaDataType_t cuda_type(Dtype dtype) { return dtype == Dtype::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F; }

// One block per row: a pass for the max, a pass for Σexp(z − max), then the
// target logit. Three reads of a V-wide row: stage 02 does it in one.
__global__ void cross_entropy_rows_kernel(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                                          int64_t v, int64_t ignore_index, float softcap, float* __restrict__ lse,
                                          float* __restrict__ loss_per_token) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float* z_row = logits + row * v;
  // EXERCISE(the row's LSE and loss): a max pass, a Σexp(z − max) pass, then LSE and loss
  CCE_EXERCISE_MISSING("01_materialized", "the row's LSE and loss");
  // END EXERCISE
}

__device__ __forceinline__ float dlogit_value(float logit, int64_t j, int64_t target, float row_lse, float g,
                                              float softcap) {
  const float z = apply_softcap(logit, softcap);
  const float p = __expf(z - row_lse);
  return g * (p - (j == target ? 1.0f : 0.0f)) * softcap_derivative(z, softcap);
}

// fp32: dlogit overwrites each logit in place.
__global__ void dlogits_fp32_kernel(float* __restrict__ logits, const int64_t* __restrict__ targets,
                                    const float* __restrict__ lse, const float* __restrict__ grad_scale, int64_t v,
                                    float softcap) {
  const int64_t row = blockIdx.x;
  const float g = grad_scale[row], row_lse = lse[row];
  const int64_t t = targets[row];
  float* z_row = logits + row * v;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) z_row[j] = dlogit_value(z_row[j], j, t, row_lse, g, softcap);
}

// bf16: dlogit_ij lands at bf16 index j of the row's own storage, i.e. in the
// first half of the fp32 row. In a chunk of 2·blockDim logits, every thread
// reads its two floats, the block syncs, then writes them as two bf16 values:
// the writes of a chunk only touch bytes that this or an earlier chunk has
// already read, so one barrier per chunk makes the in-place rewrite safe.
__global__ void dlogits_bf16_packed_kernel(float* __restrict__ logits, const int64_t* __restrict__ targets,
                                           const float* __restrict__ lse, const float* __restrict__ grad_scale,
                                           int64_t v, float softcap) {
  const int64_t row = blockIdx.x;
  const float g = grad_scale[row], row_lse = lse[row];
  const int64_t t = targets[row];
  float* z_row = logits + row * v;
  __nv_bfloat16* out_row = reinterpret_cast<__nv_bfloat16*>(z_row);
  for (int64_t chunk = 0; chunk < v; chunk += 2 * blockDim.x) {
    const int64_t j = chunk + 2 * threadIdx.x;
    float a = 0.0f, b = 0.0f;
    if (j < v) a = dlogit_value(z_row[j], j, t, row_lse, g, softcap);
    if (j + 1 < v) b = dlogit_value(z_row[j + 1], j + 1, t, row_lse, g, softcap);
    __syncthreads();
    if (j + 1 < v)
      *reinterpret_cast<__nv_bfloat162*>(out_row + j) = __floats2bfloat162_rn(a, b);
    else if (j < v)
      out_row[j] = __float2bfloat16(a);
  }
}

}  // namespace

void gemm_logits(const DeviceInputs& in, float* logits, cudaStream_t stream) {
  const Problem& p = in.problem;
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = cuda_type(p.dtype);
  cublasHandle_t handle = cublas_handle_on(stream);
  // Row-major logits [N,V] is column-major [V,N] = C·Eᵀ in column-major terms,
  // where row-major C [V,D] reads as column-major Cᵀ [D,V] (hence OP_T).
  CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(p.v),
                                static_cast<int>(p.n), static_cast<int>(p.d), &one, in.c.get(), t,
                                static_cast<int>(p.d), in.e.get(), t, static_cast<int>(p.d), &zero, logits,
                                CUDA_R_32F, static_cast<int>(p.v), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_gradients(const DeviceInputs& in, const void* dlogit, int64_t dlogit_pitch, void* de, void* dc,
                    cudaStream_t stream) {
  const Problem& p = in.problem;
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = cuda_type(p.dtype);
  const int n = static_cast<int>(p.n), d = static_cast<int>(p.d), v = static_cast<int>(p.v);
  const int pitch = static_cast<int>(dlogit_pitch);
  cublasHandle_t handle = cublas_handle_on(stream);
  // dE [N,D] row-major = column-major [D,N] = Cᵀ[D,V] · dlogitᵀ[V,N].
  CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, n, v, &one, in.c.get(), t, d, dlogit,
                                t, pitch, &zero, de, t, d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  // dC [V,D] row-major = column-major [D,V] = Eᵀ[D,N] · dlogit[N,V].
  CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, d, v, n, &one, in.e.get(), t, d, dlogit,
                                t, pitch, &zero, dc, t, d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

int64_t logits_to_dlogits_in_place(const DeviceInputs& in, float* logits, const float* lse, const float* grad_scale,
                                   cudaStream_t stream) {
  const Problem& p = in.problem;
  const unsigned rows = static_cast<unsigned>(p.n);
  if (p.dtype == Dtype::kFloat32) {
    dlogits_fp32_kernel<<<rows, kRowThreads, 0, stream>>>(logits, in.targets.get(), lse, grad_scale, p.v, p.softcap);
    CCE_CHECK_LAUNCH();
    return p.v;
  }
  dlogits_bf16_packed_kernel<<<rows, kRowThreads, 0, stream>>>(logits, in.targets.get(), lse, grad_scale, p.v,
                                                              p.softcap);
  CCE_CHECK_LAUNCH();
  return 2 * p.v;
}

std::vector<MemoryItem> materialized_scratch(const Problem& p, bool backward) {
  std::vector<MemoryItem> items = {{"logits fp32 [N,V]", static_cast<size_t>(p.n) * p.v * 4}};
  items = concat(items, per_token_loss_scratch(p));
  if (backward) items.push_back({"per-token grad scale", static_cast<size_t>(p.n) * 4});
  return items;
}

void launch_row_kernel(RowKernel kernel, int threads, const DeviceInputs& in, const float* logits, float* lse,
                       float* loss_per_token, cudaStream_t stream) {
  const Problem& p = in.problem;
  kernel<<<static_cast<unsigned>(p.n), threads, 0, stream>>>(logits, in.targets.get(), p.v, p.ignore_index, p.softcap,
                                                              lse, loss_per_token);
  CCE_CHECK_LAUNCH();
}

void cross_entropy_rows(const DeviceInputs& in, const float* logits, float* lse, float* loss_per_token,
                        cudaStream_t stream) {
  launch_row_kernel(cross_entropy_rows_kernel, kRowThreads, in, logits, lse, loss_per_token, stream);
}

void backward_through_logits(const DeviceInputs& in, Scratch& scratch, const float* lse, const float* upstream,
                             void* de, void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  if (!scratch.has("logits fp32 [N,V]")) throw InputError("backward() before forward()");
  scratch.allocate(materialized_scratch(p, true));
  float* logits = scratch.get<float>("logits fp32 [N,V]");
  float* grad_scale = scratch.get<float>("per-token grad scale");
  compute_token_grad_scale(p, in.targets.get(), upstream, grad_scale, stream);
  // The logits buffer now holds dlogit: a second forward must recompute it.
  const int64_t pitch = logits_to_dlogits_in_place(in, logits, lse, grad_scale, stream);
  gemm_gradients(in, logits, pitch, de, dc, stream);
}

void forward_through_logits(const DeviceInputs& in, Scratch& scratch, float* loss, float* lse, RowLosses rows,
                            cudaStream_t stream) {
  const Problem& p = in.problem;
  scratch.allocate(materialized_scratch(p, false));
  float* logits = scratch.get<float>("logits fp32 [N,V]");
  gemm_logits(in, logits, stream);
  float* per_token = per_token_loss_buffer(p, loss, scratch);
  rows(in, logits, lse, per_token, stream);
  finish_loss(p, per_token, in.targets.get(), loss, stream);
}

std::unique_ptr<Stage> make_materialized_stage(const std::string& name, const std::string& summary,
                                               RowLosses rows) {
  StageParts parts;
  parts.name = name;
  parts.summary = summary;
  parts.workspace = materialized_scratch;
  parts.forward = [rows](const DeviceInputs& in, Scratch& scratch, float* loss, float* lse, cudaStream_t stream) {
    forward_through_logits(in, scratch, loss, lse, rows, stream);
  };
  parts.backward = backward_through_logits;
  return make_stage_from(parts);
}

std::unique_ptr<Stage> make_stage() {
  return make_materialized_stage("01_materialized", "cuBLAS logits [N,V] in fp32, softmax CE, backward through the logits",
                                 cross_entropy_rows);
}

}  // namespace cce::s01
