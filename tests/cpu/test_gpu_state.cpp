// How a probe of the GPU is classified (common/device_buffer.h): only missing
// hardware or software is "missing" (reported as skipped); a GPU that CUDA
// cannot use is "broken" (reported as a failure). classify_gpu is pure, so
// every state is tested here without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "common/device_buffer.h"

namespace cce {
namespace {

constexpr int kDriver13 = 13000;  // what cudaDriverGetVersion reports for a CUDA 13.0 driver

TEST(GpuState, NoDriverLoadedIsMissing) {
  // Without a driver the runtime says "insufficient driver", with version 0.
  EXPECT_EQ(classify_gpu(cudaErrorInsufficientDriver, 0, 0, 0), GpuState::kMissing);
  EXPECT_EQ(classify_gpu(cudaErrorNoDevice, 0, 0, 0), GpuState::kMissing);
}

TEST(GpuState, NoDeviceIsMissing) {
  EXPECT_EQ(classify_gpu(cudaErrorNoDevice, 0, kDriver13, 0), GpuState::kMissing);
  EXPECT_EQ(classify_gpu(cudaSuccess, 0, kDriver13, 0), GpuState::kMissing);
}

TEST(GpuState, OlderThanSm80IsMissing) {
  EXPECT_EQ(classify_gpu(cudaSuccess, 1, kDriver13, 7), GpuState::kMissing);  // T4: 7.5
  EXPECT_EQ(classify_gpu(cudaSuccess, 4, kDriver13, 6), GpuState::kMissing);  // P100: 6.0
}

TEST(GpuState, InsufficientDriverIsBroken) {
  // A driver is loaded (version > 0) but older than the runtime: a GPU is
  // there and unusable, which must fail, not read as "no GPU".
  EXPECT_EQ(classify_gpu(cudaErrorInsufficientDriver, 0, 12020, 0), GpuState::kBroken);
}

TEST(GpuState, AnyOtherErrorIsBroken) {
  for (cudaError_t error : {cudaErrorInitializationError, cudaErrorSystemDriverMismatch,
                            cudaErrorCompatNotSupportedOnDevice, cudaErrorDevicesUnavailable, cudaErrorUnknown}) {
    SCOPED_TRACE(cudaGetErrorName(error));
    EXPECT_EQ(classify_gpu(error, 0, kDriver13, 0), GpuState::kBroken);
  }
}

TEST(GpuState, Sm80AndNewerIsUsable) {
  EXPECT_EQ(classify_gpu(cudaSuccess, 1, kDriver13, 9), GpuState::kUsable);  // H100: 9.0
  EXPECT_EQ(classify_gpu(cudaSuccess, 8, kDriver13, 8), GpuState::kUsable);  // A100: 8.0
}

// On this machine, whatever it has, the probe agrees with the boolean that
// the sizing code uses, and says why whenever the GPU is not usable.
TEST(GpuState, ProbeAgreesWithTheBoolean) {
  std::string why;
  const GpuState state = probe_gpu(&why);
  EXPECT_EQ(cuda_device_available(), state == GpuState::kUsable);
  if (state != GpuState::kUsable) {
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace cce
