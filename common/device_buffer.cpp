#include "common/device_buffer.h"

#include <algorithm>
#include <atomic>

#include "common/check.h"

namespace cce {
namespace {
std::atomic<size_t> g_current{0};
std::atomic<size_t> g_peak{0};
}  // namespace

void* AllocationTracker::allocate(size_t bytes) {
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls work
    throw CudaError("cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(status) +
                    " (" + std::to_string(g_current.load() >> 20) + " MiB already allocated by this run)");
  }
  size_t now = g_current.fetch_add(bytes) + bytes;
  size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return ptr;
}

void AllocationTracker::release(void* ptr, size_t bytes) {
  // A destructor must not throw: a failing cudaFree here means the context is
  // already broken, and the call that broke it has reported that.
  cudaFree(ptr);
  g_current.fetch_sub(bytes);
}

size_t AllocationTracker::current_bytes() { return g_current.load(); }
size_t AllocationTracker::peak_bytes() { return g_peak.load(); }
void AllocationTracker::reset_peak() { g_peak.store(g_current.load()); }

void poison_device(void* ptr, size_t bytes, cudaStream_t stream) {
  CCE_CUDA_CHECK(cudaMemsetAsync(ptr, 0xFF, bytes, stream));
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  CCE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  CCE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    if (why) *why = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device found";
    return false;
  }
  return true;
}

}  // namespace cce
