// The device's softcap (common/device_math.cuh) against s·tanh(l/s) in double:
// every value within the bound docs/tolerances.md derives for it ("A logit"),
// 12·s·u + u·|z|, from logits near 0 to far past saturation, and ±s at ±inf.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/device_math.cuh"
#include "common/error_bound.h"
#include "tests/gpu/skip_without_gpu.h"

namespace cce {
namespace {

__global__ void softcap_kernel(const float* __restrict__ logits, int64_t n, float softcap, float* __restrict__ z) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) z[i] = apply_softcap(logits[i], softcap);
}

std::vector<float> softcapped_on_device(const std::vector<float>& logits, float softcap) {
  const int64_t n = static_cast<int64_t>(logits.size());
  DeviceBuffer<float> in(logits.size()), out(logits.size());
  copy_to_device(in.get(), logits.data(), in.bytes());
  poison_device(out.get(), out.bytes());
  softcap_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(in.get(), n, softcap, out.get());
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> z(logits.size());
  copy_to_host(z.data(), out.get(), out.bytes());
  return z;
}

// l/s evenly over [−40, 40] (tanh is ±1 in fp32 beyond 9), tiny ones, and seeded random ones.
std::vector<float> logits_for(float softcap) {
  std::vector<float> logits;
  for (int k = -200000; k <= 200000; ++k) logits.push_back(softcap * static_cast<float>(k) * 2e-4f);
  for (float tiny : {1e-30f, 1e-12f, 1e-6f, 1e-3f}) {
    logits.push_back(tiny * softcap);
    logits.push_back(-tiny * softcap);
  }
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int k = 0; k < 100000; ++k) logits.push_back(softcap * normal(rng));
  return logits;
}

TEST(DeviceMath, SoftcapWithinItsBound) {
  SKIP_WITHOUT_GPU();
  for (const float softcap : {0.5f, 1.0f, 30.0f, 1000.0f}) {
    const std::vector<float> logits = logits_for(softcap);
    const std::vector<float> z = softcapped_on_device(logits, softcap);
    double worst = 0.0;  // the largest error as a share of its bound
    size_t at = 0;
    for (size_t k = 0; k < logits.size(); ++k) {
      const double exact = softcap * std::tanh(static_cast<double>(logits[k]) / softcap);
      const double bound = kFp32Unit * (12.0 * softcap + std::fabs(exact));
      const double share = std::fabs(static_cast<double>(z[k]) - exact) / bound;
      if (!(share <= worst)) worst = share, at = k;  // NaN lands here too
    }
    EXPECT_LE(worst, 1.0) << "softcap " << softcap << ": logit " << logits[at] << " gave " << z[at]
                          << ", s·tanh(l/s) = " << softcap * std::tanh(static_cast<double>(logits[at]) / softcap);
    const std::vector<float> ends = softcapped_on_device({INFINITY, -INFINITY}, softcap);
    EXPECT_EQ(ends[0], softcap);
    EXPECT_EQ(ends[1], -softcap);
  }
}

TEST(DeviceMath, NoSoftcapLeavesTheLogit) {
  SKIP_WITHOUT_GPU();
  const std::vector<float> logits = {-1e30f, -3.5f, -0.0f, 0.0f, 1e-30f, 7.25f, 1e30f};
  const std::vector<float> z = softcapped_on_device(logits, 0.0f);
  for (size_t k = 0; k < logits.size(); ++k) EXPECT_EQ(z[k], logits[k]);
}

}  // namespace
}  // namespace cce
