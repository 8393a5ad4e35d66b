// common/sort_pairs.h against std::stable_sort: the same keys and values, bit
// for bit, on both sides of one block's capacity (one block, then cub's device
// sort), with many ties, keys at the top of their bits, and nothing written
// past the count (the refusals: tests/cpu/test_sort_pairs.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/radix_sort.cuh"
#include "common/sort_pairs.h"
#include "tests/gpu/skip_without_gpu.h"

namespace cce {
namespace {

constexpr int64_t kSlack = 16;  // entries past the count, poisoned, that must stay so

struct Sorted {
  std::vector<int> keys, values;
};

Sorted sorted_on_device(const std::vector<int>& keys, const std::vector<int>& values, int bits) {
  const int64_t count = static_cast<int64_t>(keys.size());
  DeviceBuffer<int> in_keys(keys.size()), in_values(values.size());
  DeviceBuffer<int> out_keys(keys.size() + kSlack), out_values(keys.size() + kSlack);
  const size_t temp_bytes = radix_sort_pairs_temp_bytes<int>(count, false);
  DeviceBuffer<unsigned char> temp(temp_bytes);
  copy_to_device(in_keys.get(), keys.data(), in_keys.bytes());
  copy_to_device(in_values.get(), values.data(), in_values.bytes());
  poison_device(out_keys.get(), out_keys.bytes());
  poison_device(out_values.get(), out_values.bytes());
  sort_int_pairs(temp.get(), temp_bytes, in_keys.get(), out_keys.get(), in_values.get(), out_values.get(), count, bits,
                 nullptr);
  CCE_CUDA_CHECK(cudaDeviceSynchronize());
  Sorted s{std::vector<int>(keys.size() + kSlack), std::vector<int>(keys.size() + kSlack)};
  copy_to_host(s.keys.data(), out_keys.get(), out_keys.bytes());
  copy_to_host(s.values.data(), out_values.get(), out_values.bytes());
  return s;
}

TEST(SortPairs, StableAsTheHostsSortOnBothSidesOfOneBlock) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1234);
  const int64_t one_block = kOneBlockSortPairs;
  for (const int64_t count : {int64_t{1}, int64_t{77}, one_block - 1, one_block, one_block + 1, int64_t{20011}})
    for (const int bits : {1, 8, 15, 31}) {
      const int largest = bits == 31 ? 0x7fffffff : (1 << bits) - 1;
      // Few distinct keys (many ties), the largest key among them: it sorts beside one block's padding.
      std::uniform_int_distribution<int> pick(0, 40);
      std::vector<int> keys(static_cast<size_t>(count)), values(static_cast<size_t>(count));
      for (int64_t k = 0; k < count; ++k) {
        const int draw = pick(rng);
        keys[k] = draw == 40 ? largest : static_cast<int>(static_cast<int64_t>(draw) * largest / 40);
        values[k] = static_cast<int>(rng() >> 1);
      }
      std::vector<int> order(static_cast<size_t>(count));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
      const Sorted got = sorted_on_device(keys, values, bits);
      int64_t wrong = 0;
      for (int64_t k = 0; k < count; ++k)
        wrong += got.keys[k] != keys[order[k]] || got.values[k] != values[order[k]];
      EXPECT_EQ(wrong, 0) << "count " << count << ", bits " << bits;
      // poison_device fills bytes with 0xFF: nothing past the count was written.
      for (int64_t k = count; k < count + kSlack; ++k) {
        EXPECT_EQ(got.keys[k], -1) << "key written past the count " << count << " at " << k;
        EXPECT_EQ(got.values[k], -1) << "value written past the count " << count << " at " << k;
      }
    }
}

}  // namespace
}  // namespace cce
