// What programmatic dependent launch (sm_90) saves between small kernels that each need the one before: a
// chain of K kernels, each reading what the last one wrote, queued behind a spinning kernel (so every launch is
// queued before the GPU reaches it, as in a stage call whose host is ahead), timed from the spin's end to the
// chain's end. Launched plainly, then with cudaLaunchAttributeProgrammaticStreamSerialization and each kernel
// starting with griddepcontrol.launch_dependents (the next one may launch) and griddepcontrol.wait (the one before
// has finished and its writes are visible). The chain's result is checked against the host's in both forms.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 docs/profiles/session45_h200/chain_bench.cu -o /tmp/chain_bench && /tmp/chain_bench
//
// Prints, per grid size, the median µs per kernel of each form over 30 chains; exit 1 on a wrong result.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t status_ = (call);                                                            \
    if (status_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// x[i] = x[(i + 1) % n] / 2 + 1 reads a neighbour the previous kernel wrote: a missing wait shows in the result.
template <bool kDependent>
__global__ void step_kernel(const float* in, float* out, int n) {
  if constexpr (kDependent) {
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[(i + 1) % n] * 0.5f + 1.0f;
}

template <bool kDependent>
void launch_step(const float* in, float* out, int n, int blocks, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(256);
  config.stream = stream;
  config.attrs = kDependent ? &attribute : nullptr;
  config.numAttrs = kDependent ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&config, step_kernel<kDependent>, in, out, n));
}

template <bool kDependent>
float chain_us_per_kernel(float* a, float* b, int n, int blocks, int kernels, cudaStream_t stream, cudaEvent_t start,
                          cudaEvent_t stop) {
  spin_kernel<<<1, 1, 0, stream>>>(400000);  // about 0.2 ms: the chain's launches are queued before it ends
  CHECK(cudaEventRecord(start, stream));
  for (int k = 0; k < kernels; ++k) launch_step<kDependent>(k % 2 ? b : a, k % 2 ? a : b, n, blocks, stream);
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  return 1000.0f * ms / static_cast<float>(kernels);
}

int main() {
  constexpr int kKernels = 32, kChains = 30;
  cudaStream_t stream;
  cudaEvent_t start, stop;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  int failures = 0;
  std::printf("%8s %8s %16s %16s\n", "blocks", "n", "plain us/kernel", "dependent us/kernel");
  for (const int blocks : {1, 32, 132, 528}) {
    const int n = blocks * 256;
    std::vector<float> host(n), want(n), got(n);
    for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 97);
    want = host;
    for (int k = 0; k < kKernels; ++k) {
      std::vector<float> next(n);
      for (int i = 0; i < n; ++i) next[i] = want[(i + 1) % n] * 0.5f + 1.0f;
      want = next;
    }
    float *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, n * sizeof(float)));
    CHECK(cudaMalloc(&b, n * sizeof(float)));
    std::vector<float> plain, dependent;
    for (int chain = 0; chain < kChains; ++chain)
      for (const bool use_pdl : {false, true}) {
        CHECK(cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        const float us = use_pdl ? chain_us_per_kernel<true>(a, b, n, blocks, kKernels, stream, start, stop)
                                 : chain_us_per_kernel<false>(a, b, n, blocks, kKernels, stream, start, stop);
        (use_pdl ? dependent : plain).push_back(us);
        CHECK(cudaMemcpy(got.data(), kKernels % 2 ? b : a, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; ++i)
          if (got[i] != want[i]) {
            ++failures;
            std::printf("wrong result: %s chain, %d blocks, element %d: %g, want %g\n", use_pdl ? "dependent" : "plain",
                        blocks, i, got[i], want[i]);
            break;
          }
      }
    std::sort(plain.begin(), plain.end());
    std::sort(dependent.begin(), dependent.end());
    std::printf("%8d %8d %16.2f %16.2f\n", blocks, n, plain[kChains / 2], dependent[kChains / 2]);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }
  return failures == 0 ? 0 : 1;
}
