// cuBLAS bf16 output against its fp32 output rounded once, at a few shapes (stage 10 WORKLOG, 2026-11-25); run with
// and without CUBLAS_WORKSPACE_CONFIG:  nvcc -O2 -arch=sm_90 -o probe cublas_bf16_output_probe.cu -lcublas
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#define CK(x) do { auto r = (x); if (r != 0) { std::printf("error %d at %s:%d\n", (int)r, __FILE__, __LINE__); std::exit(1); } } while (0)
__global__ void fill_kernel(__nv_bfloat16* x, size_t n, unsigned seed, float scale) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) { unsigned v = (unsigned)(i * 2654435761u) ^ seed; v ^= v >> 13; v *= 0x5bd1e995u; v ^= v >> 15;
    x[i] = __float2bfloat16(((v & 0xffff) / 65536.0f - 0.5f) * scale); }
}
__global__ void round_kernel(const float* x, __nv_bfloat16* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; if (i < n) y[i] = __float2bfloat16(x[i]);
}
int main() {
  cublasHandle_t h; CK(cublasCreate(&h));
  void* ws; CK(cudaMalloc(&ws, 32 << 20)); CK(cublasSetWorkspace(h, ws, 32 << 20));
  struct S { int m, n, k; cublasOperation_t ta, tb; const char* what; };
  S shapes[] = {{100, 300, 77, CUBLAS_OP_N, CUBLAS_OP_T, "slab dC 77x100x1129"},
                {100, 30, 1129, CUBLAS_OP_N, CUBLAS_OP_N, "chunk dE rows"},
                {2304, 2048, 256000, CUBLAS_OP_N, CUBLAS_OP_N, "gemma2 chunk dE rows"},
                {2304, 256000, 8192, CUBLAS_OP_N, CUBLAS_OP_T, "gemma2 dC, all rows"},
                {768, 32000, 8192, CUBLAS_OP_N, CUBLAS_OP_T, "lm32k dC, all rows"}};
  for (const S& s : shapes) {
    size_t a_n = (size_t)s.m * s.k, b_n = (size_t)s.k * s.n, c_n = (size_t)s.m * s.n;
    __nv_bfloat16 *a, *b, *c16, *r16; float* c32;
    CK(cudaMalloc(&a, a_n * 2)); CK(cudaMalloc(&b, b_n * 2)); CK(cudaMalloc(&c16, c_n * 2)); CK(cudaMalloc(&r16, c_n * 2));
    CK(cudaMalloc(&c32, c_n * 4));
    fill_kernel<<<(a_n + 255) / 256, 256>>>(a, a_n, 1u, 2.0f); fill_kernel<<<(b_n + 255) / 256, 256>>>(b, b_n, 7u, 2e-3f);
    float one = 1, zero = 0;
    int lda = s.m, ldb = s.tb == CUBLAS_OP_N ? s.k : s.n;
    cudaEvent_t e0, e1, e2; cudaEventCreate(&e0); cudaEventCreate(&e1); cudaEventCreate(&e2);
    for (int rep = 0; rep < 2; ++rep) {
      cudaEventRecord(e0);
      CK(cublasGemmEx(h, s.ta, s.tb, s.m, s.n, s.k, &one, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &zero, c16, CUDA_R_16BF, s.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      cudaEventRecord(e1);
      CK(cublasGemmEx(h, s.ta, s.tb, s.m, s.n, s.k, &one, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &zero, c32, CUDA_R_32F, s.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      cudaEventRecord(e2); CK(cudaDeviceSynchronize());
    }
    float t16, t32; cudaEventElapsedTime(&t16, e0, e1); cudaEventElapsedTime(&t32, e1, e2);
    round_kernel<<<(c_n + 255) / 256, 256>>>(c32, r16, c_n); CK(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> x(c_n), y(c_n);
    CK(cudaMemcpy(x.data(), c16, c_n * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(y.data(), r16, c_n * 2, cudaMemcpyDeviceToHost));
    size_t diff = 0; for (size_t i = 0; i < c_n; ++i) diff += (*(unsigned short*)&x[i] != *(unsigned short*)&y[i]);
    std::printf("%-24s bf16-out %.3f ms, fp32-out %.3f ms, values differing from fp32 rounded once: %zu of %zu\n", s.what, t16, t32, diff, c_n);
    cudaFree(a); cudaFree(b); cudaFree(c16); cudaFree(r16); cudaFree(c32);
  }
}
