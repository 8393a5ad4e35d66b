#include "common/device_buffer.h"

#include <algorithm>
#include <atomic>

#include "common/check.h"

namespace cce {
namespace {
constexpr int kMaxDevices = 64;
std::atomic<size_t> g_current[kMaxDevices];
std::atomic<size_t> g_peak[kMaxDevices];

int device_index(int device) {
  if (device < 0) cudaGetDevice(&device);  // the current device (0 when that call fails: nothing was allocated)
  return device >= 0 && device < kMaxDevices ? device : 0;
}

// The device that holds ptr (device memory from cudaMalloc).
int device_of(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return device_index(-1);
  }
  return device_index(attributes.device);
}
}  // namespace

void* AllocationTracker::allocate(size_t bytes) {
  const int device = device_index(-1);
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls work
    throw CudaError("cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(status) +
                    " (" + std::to_string(g_current[device].load() >> 20) + " MiB already allocated by this run on GPU " +
                    std::to_string(device) + ")");
  }
  size_t now = g_current[device].fetch_add(bytes) + bytes;
  size_t peak = g_peak[device].load();
  while (now > peak && !g_peak[device].compare_exchange_weak(peak, now)) {
  }
  return ptr;
}

void AllocationTracker::release(void* ptr, size_t bytes) {
  const int device = device_of(ptr);
  // A destructor must not throw: a failing cudaFree here means the context is
  // already broken, and the call that broke it has reported that.
  cudaFree(ptr);
  g_current[device].fetch_sub(bytes);
}

size_t AllocationTracker::current_bytes(int device) { return g_current[device_index(device)].load(); }
size_t AllocationTracker::peak_bytes(int device) { return g_peak[device_index(device)].load(); }
void AllocationTracker::reset_peak() {
  for (int d = 0; d < kMaxDevices; ++d) g_peak[d].store(g_current[d].load());
}

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
  if (status == cudaSuccess && count > 0) {
    // The kernels use bf16 mma.sync and cp.async, which need sm_80 (A100) or
    // newer; an older GPU would fail at the first launch ("no kernel image").
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major < 8) {
      if (why)
        *why = std::string("no usable CUDA GPU (") + prop.name + " has compute capability " +
               std::to_string(prop.major) + "." + std::to_string(prop.minor) +
               ", and the kernels need 8.0, an A100, or newer)";
      return false;
    }
    return true;
  }
  cudaGetLastError();
  // Without an NVIDIA driver the runtime reports "driver version is
  // insufficient", which reads like an upgrade hint; the driver version it
  // reports is then 0, and the plain truth is that there is no GPU. The text
  // has no colon, so that scripts/test.sh can pick it out of a skip message.
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::string text;
  if (driver == 0)
    text = "no CUDA GPU found (no NVIDIA driver is loaded)";
  else if (status == cudaSuccess || status == cudaErrorNoDevice)
    text = "no CUDA GPU found";
  else if (status == cudaErrorInsufficientDriver)
    text = "the NVIDIA driver supports CUDA " + std::to_string(driver / 1000) + "." +
           std::to_string(driver % 1000 / 10) + ", older than the CUDA " + std::to_string(runtime / 1000) + "." +
           std::to_string(runtime % 1000 / 10) + " this was built with";
  else
    text = std::string("no usable CUDA GPU (") + cudaGetErrorString(status) + ")";
  if (why) *why = text;
  return false;
}

}  // namespace cce
