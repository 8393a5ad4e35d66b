// Session 43: one block's radix sort of 8192 (int key, int value) pairs in a few shapes (threads × pairs a thread,
// radix bits a pass) against cub's device radix sort, at 8 and 15 key bits (lm32k's token and target sorts). Each
// result is checked against cub's (the same pairs, bit for bit). Median of 200 launches, CUDA events.
// nvcc -std=c++17 -O3 -arch=sm_90 sort_bench.cu -o sort_bench && ./sort_bench
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <random>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

template <int kThreads, int kItems, int kBits>
__global__ void __launch_bounds__(kThreads) one_block(const int* keys, int* sorted_keys, const int* values, int* sorted_values, int count, int bits) {
  using Sort = cub::BlockRadixSort<int, kThreads, kItems, int, kBits>;
  __shared__ typename Sort::TempStorage storage;
  int key[kItems], value[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int k = threadIdx.x * kItems + j;
    key[j] = k < count ? keys[k] : INT_MAX;
    value[j] = k < count ? values[k] : 0;
  }
  Sort(storage).SortBlockedToStriped(key, value, 0, bits);
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int k = j * kThreads + threadIdx.x;
    if (k < count) sorted_keys[k] = key[j], sorted_values[k] = value[j];
  }
}

template <typename F>
float median_us(F launch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 220; ++r) {
    cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    if (r >= 20) t.push_back(ms * 1000.0f);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  const int n = 8192;
  std::mt19937 rng(1234);
  int *keys, *values, *ref_k, *ref_v, *out_k, *out_v; void* temp; size_t temp_bytes = 0;
  CHECK(cudaMalloc(&keys, n * 4)); CHECK(cudaMalloc(&values, n * 4)); CHECK(cudaMalloc(&ref_k, n * 4));
  CHECK(cudaMalloc(&ref_v, n * 4)); CHECK(cudaMalloc(&out_k, n * 4)); CHECK(cudaMalloc(&out_v, n * 4));
  CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, ref_k, values, ref_v, n, 0, 31));
  CHECK(cudaMalloc(&temp, temp_bytes));
  int failures = 0;
  for (int bits : {8, 15}) {
    std::vector<int> hk(n), hv(n);
    for (int i = 0; i < n; ++i) hk[i] = static_cast<int>(rng() % (bits == 8 ? 251u : 32001u)), hv[i] = i;
    CHECK(cudaMemcpy(keys, hk.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(values, hv.data(), n * 4, cudaMemcpyHostToDevice));
    const float device_us = median_us([&] { cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, ref_k, values, ref_v, n, 0, bits); });
    std::printf("bits %2d  cub device sort                %6.2f us\n", bits, device_us);
    std::vector<int> rk(n), rv(n), gk(n), gv(n);
    CHECK(cudaMemcpy(rk.data(), ref_k, n * 4, cudaMemcpyDeviceToHost)); CHECK(cudaMemcpy(rv.data(), ref_v, n * 4, cudaMemcpyDeviceToHost));
    auto run = [&](const char* name, auto kernel, int threads) {
      const float us = median_us([&] { kernel<<<1, threads>>>(keys, out_k, values, out_v, n, bits); });
      cudaMemcpy(gk.data(), out_k, n * 4, cudaMemcpyDeviceToHost); cudaMemcpy(gv.data(), out_v, n * 4, cudaMemcpyDeviceToHost);
      const bool same = gk == rk && gv == rv && cudaGetLastError() == cudaSuccess;
      failures += !same;
      std::printf("bits %2d  one block %-20s %6.2f us  %s\n", bits, name, us, same ? "same as cub" : "DIFFERS");
    };
    run("512 x 16, 4 bits", one_block<512, 16, 4>, 512);
    run("1024 x 8, 4 bits", one_block<1024, 8, 4>, 1024);
    run("512 x 16, 5 bits", one_block<512, 16, 5>, 512);
    run("256 x 32, 4 bits", one_block<256, 32, 4>, 256);
  }
  std::printf("%d variants differ from cub's order\n", failures);
  return failures == 0 ? 0 : 1;
}
