// A stable sort of (int key, int value) pairs by the key's bits [0, bits), as
// the stages' small sorts need it (tokens by a count of tiles, tokens or rows
// by target): one block sorts them when they fit in it (kOneBlockSortPairs),
// cub's device radix sort sorts more. Both sorts are stable, so both give the
// same order, bit for bit; one block saves the device sort's launches and
// passes over global memory (at N = 8192 about ten operations a sort).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace cce {

inline constexpr int kOneBlockSortThreads = 1024, kOneBlockSortItems = 8;
inline constexpr int64_t kOneBlockSortPairs = int64_t{kOneBlockSortThreads} * kOneBlockSortItems;

// The scratch `temp` must hold radix_sort_pairs_temp_bytes<int>(count, false)
// (common/radix_sort.cuh); one block does not touch it. Keys must be
// non-negative and below 2^bits (bits 1..31).
void sort_int_pairs(void* temp, size_t temp_bytes, const int* keys, int* sorted_keys, const int* values,
                    int* sorted_values, int64_t count, int bits, cudaStream_t stream);

}  // namespace cce
