// The scratch cub's radix sort of (key, int) pairs needs, and the bits a sort
// of small integer keys needs. Without a device cub cannot be asked (the
// tour's memory table): 8 bytes per pair plus 1 MiB is a safe estimate.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "common/check.h"
#include "common/device_buffer.h"

namespace cce {

// cub's answer depends on the key type, the order, the count and the device
// alone, and asking it costs occupancy queries (microseconds of host time
// before the GPU gets work); the stages plan their memory on every call, so
// each question is asked once per process.
template <typename Key>
size_t radix_sort_pairs_temp_bytes(int64_t count, bool descending) {
  if (!cuda_device_available()) return static_cast<size_t>(count) * 8 + (size_t{1} << 20);
  const int device = current_device_index();
  static std::mutex mutex;
  static std::map<std::tuple<int, int64_t, bool>, size_t> known;
  const std::tuple<int, int64_t, bool> question{device, count, descending};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto found = known.find(question); found != known.end()) return found->second;
  }
  size_t bytes = 0;
  const Key* keys = nullptr;
  const int* values = nullptr;
  if (descending)
    CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, keys, static_cast<Key*>(nullptr), values,
                                                             static_cast<int*>(nullptr), static_cast<int>(count)));
  else
    CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, static_cast<Key*>(nullptr), values,
                                                   static_cast<int*>(nullptr), static_cast<int>(count)));
  const std::lock_guard<std::mutex> lock(mutex);
  known.emplace(question, bytes);
  return bytes;
}

// The bits that hold every key in [0, largest_key]: a radix sort of only those.
inline int radix_key_bits(int64_t largest_key) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) <= largest_key) ++bits;
  return bits;
}

}  // namespace cce
