// common/dependent_launch.cuh on the device. Behind a kernel that lets the next one launch and then runs for
// 200 µs, a kernel started by launch_dependent still reads what that kernel wrote, and so does each kernel of a
// chain of them; on sm_90 (a device and a build with sm_90 code) it also begins before the kernel ahead ends (in
// one try of three), which is what the dependent launch is for. The stages' small kernels rely on the first
// property, their speed on the second.
#include <gtest/gtest.h>

#include <vector>

#include "common/check.h"
#include "common/dependent_launch.cuh"
#include "common/device_buffer.h"
#include "tests/gpu/skip_without_gpu.h"

namespace cce {
namespace {

constexpr int kCount = 4096, kThreadsPerBlock = 256;
constexpr long long kSpinNs = 200000;

__device__ long long global_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Lets the next kernel launch (its first line, as in every small kernel of the stages), spins, then writes
// value[i] = i + 1 and its end time.
__global__ void slow_writer_kernel(int* value, long long* ended) {
  wait_for_kernel_ahead();
  const long long start = global_ns();
  while (global_ns() - start < kSpinNs) {
  }
  for (int i = threadIdx.x; i < kCount; i += blockDim.x) value[i] = i + 1;
  __syncthreads();
  if (threadIdx.x == 0) *ended = global_ns();
}

// Its start time, taken before the wait (only this test's kernel looks at anything there), then value + 1.
__global__ void reader_kernel(const int* value, int* out, long long* started) {
  const long long start = global_ns();
  wait_for_kernel_ahead();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) *started = start;
  if (i < kCount) out[i] = value[i] + 1;
}

__global__ void add_one_kernel(int* value) {
  wait_for_kernel_ahead();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kCount) value[i] += 1;
}

int wrong_entries(const std::vector<int>& got, int added) {
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) wrong += got[i] != i + 1 + added;
  return wrong;
}

class DependentLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    CCE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);  // no throwing from TearDown
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(DependentLaunch, ReaderSeesTheWritesAndStartsEarlyOnSm90) {
  int major = 0, device = 0;
  CCE_CUDA_CHECK(cudaGetDevice(&device));
  CCE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  cudaFuncAttributes attributes{};
  CCE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(reader_kernel)));
  const bool sm90 = major >= 9 && attributes.binaryVersion >= 90;
  EXPECT_EQ(dependent_launch_allowed(reinterpret_cast<const void*>(reader_kernel)), sm90);

  DeviceBuffer<int> value(kCount), out(kCount);
  DeviceBuffer<long long> times(2);  // the writer's end, the reader's start
  // PTX promises no early start, only that the wait sees the writes: a start after the writer's end (another
  // process's kernels holding the SMs) is retried, and the test fails only if no attempt of three starts early.
  int early = 0;
  for (int attempt = 0; attempt < 3 && early == 0; ++attempt) {
    poison_device(value.get(), value.bytes());
    poison_device(out.get(), out.bytes());
    CCE_CUDA_CHECK(cudaDeviceSynchronize());
    slow_writer_kernel<<<1, kThreadsPerBlock, 0, stream_>>>(value.get(), times.get());
    CCE_CHECK_LAUNCH();
    launch_dependent(reader_kernel, kCount / kThreadsPerBlock, kThreadsPerBlock, stream_, value.get(), out.get(),
                     times.get() + 1);
    CCE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<int> got(kCount);
    copy_to_host(got.data(), out.get(), out.bytes());
    EXPECT_EQ(wrong_entries(got, 1), 0) << "the reader read before the writer's writes were visible";
    long long ended_started[2] = {};
    copy_to_host(ended_started, times.get(), times.bytes());
    early += ended_started[1] < ended_started[0];
    if (!sm90)
      EXPECT_GE(ended_started[1], ended_started[0]) << "launched plainly, the reader began before the writer ended";
  }
  if (sm90) EXPECT_EQ(early, 1) << "launched as a dependent launch, the reader began after the writer ended 3 times";
}

TEST_F(DependentLaunch, ChainAddsUpBehindASlowKernel) {
  constexpr int kChain = 32;
  DeviceBuffer<int> value(kCount);
  DeviceBuffer<long long> ended(1);
  poison_device(value.get(), value.bytes());
  CCE_CUDA_CHECK(cudaDeviceSynchronize());
  slow_writer_kernel<<<1, kThreadsPerBlock, 0, stream_>>>(value.get(), ended.get());
  CCE_CHECK_LAUNCH();
  for (int k = 0; k < kChain; ++k)
    launch_dependent(add_one_kernel, kCount / kThreadsPerBlock, kThreadsPerBlock, stream_, value.get());
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<int> got(kCount);
  copy_to_host(got.data(), value.get(), value.bytes());
  EXPECT_EQ(wrong_entries(got, kChain), 0) << "a kernel of the chain ran before the one ahead had written";
}

}  // namespace
}  // namespace cce
