#include "common/sort_pairs.h"

#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <string>

#include "common/check.h"
#include "common/dependent_launch.cuh"

namespace cce {
namespace {

// Thread k holds pairs 8k .. 8k + 7 (a blocked arrangement, which is the
// order the sort keeps ties in); the pairs past `count` take the largest key,
// so, stable, they sort behind every real pair, and are not written.
__global__ void __launch_bounds__(kOneBlockSortThreads)
    one_block_sort_pairs_kernel(const int* __restrict__ keys, int* __restrict__ sorted_keys,
                                const int* __restrict__ values, int* __restrict__ sorted_values, int count, int bits) {
  wait_for_kernel_ahead();
  using Sort = cub::BlockRadixSort<int, kOneBlockSortThreads, kOneBlockSortItems, int>;
  __shared__ typename Sort::TempStorage storage;
  int key[kOneBlockSortItems], value[kOneBlockSortItems];
#pragma unroll
  for (int j = 0; j < kOneBlockSortItems; ++j) {
    const int k = threadIdx.x * kOneBlockSortItems + j;
    key[j] = k < count ? keys[k] : INT_MAX;
    value[j] = k < count ? values[k] : 0;
  }
  Sort(storage).SortBlockedToStriped(key, value, 0, bits);
  // Striped: thread k now holds sorted places k, k + 1024, ...
#pragma unroll
  for (int j = 0; j < kOneBlockSortItems; ++j) {
    const int k = j * kOneBlockSortThreads + threadIdx.x;
    if (k < count) {
      sorted_keys[k] = key[j];
      sorted_values[k] = value[j];
    }
  }
}

}  // namespace

void sort_int_pairs(void* temp, size_t temp_bytes, const int* keys, int* sorted_keys, const int* values,
                    int* sorted_values, int64_t count, int bits, cudaStream_t stream) {
  if (bits < 1 || bits > 31) throw CudaError("sort_int_pairs: bits must be 1..31, got " + std::to_string(bits));
  if (count <= 0) return;
  if (count <= kOneBlockSortPairs) {
    launch_dependent(one_block_sort_pairs_kernel, 1, kOneBlockSortThreads, stream, keys, sorted_keys, values,
                     sorted_values, static_cast<int>(count), bits);
    return;
  }
  CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, sorted_keys, values, sorted_values,
                                                 static_cast<int>(count), 0, bits, stream));
}

}  // namespace cce
