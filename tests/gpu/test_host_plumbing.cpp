// The host side of the stages' calls (common/pinned_staging.h):
//   - PinnedStaging hands out regions that do not overlap until reset(), each
//     256-byte aligned, and after a reset takes them from one block again;
//   - send() copies what it was given: the caller's memory may change at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/pinned_staging.h"
#include "tests/gpu/skip_without_gpu.h"

namespace cce {
namespace {

constexpr size_t kRegion = 700 * 1024;  // three of them cross the first 1 MiB block twice

TEST(PinnedStaging, RegionsDoNotOverlapUntilReset) {
  SKIP_WITHOUT_GPU();
  PinnedStaging staging;
  std::vector<uint8_t*> regions;
  for (int i = 0; i < 3; ++i) {
    uint8_t* r = staging.take<uint8_t>(kRegion);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 256, 0u) << "region " << i;
    std::memset(r, i + 1, kRegion);  // page-locked and writable
    regions.push_back(r);
  }
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      if (i != j) {
        EXPECT_TRUE(regions[i] + kRegion <= regions[j] || regions[j] + kRegion <= regions[i]) << i << ", " << j;
      }
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(regions[i][kRegion - 1], i + 1) << "region " << i << " was overwritten";
  staging.reset();  // the blocks merge: the same three regions now come one after another from one block
  uint8_t* first = staging.take<uint8_t>(kRegion);
  uint8_t* second = staging.take<uint8_t>(kRegion);
  uint8_t* third = staging.take<uint8_t>(kRegion);
  EXPECT_EQ(second, first + kRegion);  // 700 KiB is a multiple of 256
  EXPECT_EQ(third, second + kRegion);
}

TEST(PinnedStaging, SendCopiesWhatItWasGiven) {
  SKIP_WITHOUT_GPU();
  PinnedStaging staging;
  cudaStream_t stream = nullptr;
  CCE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t count = 1 << 18;
  DeviceBuffer<int> device(count);
  std::vector<int> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<int>(i * 7 + 1);
  const std::vector<int> sent = values;
  // Queue a long kernel-free wait first, so that the copy runs after the host has overwritten its vector.
  DeviceBuffer<uint8_t> busy(size_t{256} << 20);
  for (int i = 0; i < 8; ++i) CCE_CUDA_CHECK(cudaMemsetAsync(busy.get(), i, busy.bytes(), stream));
  staging.send(device.get(), values.data(), count * sizeof(int), stream);
  std::fill(values.begin(), values.end(), -1);
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<int> back(count);
  copy_to_host(back.data(), device.get(), count * sizeof(int));
  EXPECT_EQ(back, sent);
  CCE_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace cce
