#include "common/device_buffer.h"

#include <algorithm>
#include <atomic>

#include "common/check.h"

namespace cce {
namespace {
std::atomic<size_t> g_current[kMaxDevices];
std::atomic<size_t> g_peak[kMaxDevices];
std::atomic<bool> g_allocated{false};  // any allocation yet (the source is fixed from then on)
AllocationTracker::AllocateFn g_source_allocate = nullptr;
AllocationTracker::ReleaseFn g_source_release = nullptr;
std::atomic<bool> g_source_detached{false};

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
  g_allocated = true;
  if (g_source_allocate != nullptr) {
    ptr = g_source_allocate(bytes, device);
    if (ptr == nullptr)
      throw CudaError("the host program's allocator gave no memory for " + std::to_string(bytes) + " bytes on GPU " +
                      std::to_string(device));
  }
  cudaError_t status = ptr != nullptr ? cudaSuccess : cudaMalloc(&ptr, bytes);
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
  if (g_source_release == nullptr) cudaFree(ptr);
  else if (!g_source_detached) g_source_release(ptr, device);
  g_current[device].fetch_sub(bytes);
}

void AllocationTracker::set_source(AllocateFn allocate, ReleaseFn release) {
  if (g_allocated) throw InputError("the allocator can be set only before the first allocation");
  if ((allocate == nullptr) != (release == nullptr)) throw InputError("an allocator needs both its functions");
  g_source_allocate = allocate, g_source_release = release;
}

void AllocationTracker::detach_source() { g_source_detached = true; }

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

namespace {
// The kernels use bf16 mma.sync and cp.async, which need sm_80 (A100) or newer.
constexpr int kMinComputeMajor = 8;

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}
}  // namespace

GpuState classify_gpu(cudaError_t count_status, int count, int driver_version, int major) {
  // Without an NVIDIA driver the runtime reports "driver version is
  // insufficient" and a driver version of 0: no GPU, not an outdated driver.
  if (driver_version == 0) return GpuState::kMissing;
  if (count_status == cudaErrorNoDevice) return GpuState::kMissing;
  if (count_status != cudaSuccess) return GpuState::kBroken;
  if (count <= 0) return GpuState::kMissing;
  // An older GPU would fail at the first launch ("no kernel image").
  if (major < kMinComputeMajor) return GpuState::kMissing;
  return GpuState::kUsable;
}

GpuState probe_gpu(std::string* why) {
  int count = 0, driver = 0, runtime = 0;
  const cudaError_t count_status = cudaGetDeviceCount(&count);
  cudaGetLastError();  // a failed probe must not leave a sticky error for later calls
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceProp prop{};
  cudaError_t prop_status = cudaSuccess;
  if (count_status == cudaSuccess && count > 0) {
    prop_status = cudaGetDeviceProperties(&prop, 0);
    cudaGetLastError();
  }
  GpuState state = classify_gpu(count_status, count, driver, prop.major);
  // A device that is counted but whose properties cannot be read is broken.
  if (state != GpuState::kMissing && prop_status != cudaSuccess) state = GpuState::kBroken;
  if (state == GpuState::kUsable || why == nullptr) return state;

  if (driver == 0)
    *why = "no CUDA GPU found (no NVIDIA driver is loaded)";
  else if (count_status == cudaErrorNoDevice || (count_status == cudaSuccess && count <= 0))
    *why = "no CUDA GPU found";
  else if (count_status == cudaErrorInsufficientDriver)
    *why = "the NVIDIA driver supports CUDA " + cuda_version_text(driver) + ", older than the CUDA " +
           cuda_version_text(runtime) + " this was built with";
  else if (count_status != cudaSuccess)
    *why = std::string("CUDA cannot use the GPU (cudaGetDeviceCount failed with ") +
           cudaGetErrorString(count_status) + ")";
  else if (prop_status != cudaSuccess)
    *why = std::string("CUDA cannot read the GPU's properties (") + cudaGetErrorString(prop_status) + ")";
  else
    *why = std::string("no usable CUDA GPU (") + prop.name + " has compute capability " +
           std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", and the kernels need " +
           std::to_string(kMinComputeMajor) + ".0, an A100, or newer)";
  return state;
}

bool cuda_device_available(std::string* why) {
  if (why != nullptr) return probe_gpu(why) == GpuState::kUsable;
  // Asked on every call by the planners (a dozen times a backward): probed once.
  static const bool usable = probe_gpu() == GpuState::kUsable;
  return usable;
}

}  // namespace cce
