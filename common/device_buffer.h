// Device memory owned by RAII buffers, all allocated through one tracker.
//
// Every byte of device memory that a stage, a test or a benchmark uses is
// allocated through DeviceBuffer (or, for the cuBLAS workspace, through the
// tracker directly), so the current and peak device bytes of a run are known
// exactly, not estimated from cudaMemGetInfo. What is counted: inputs, outputs,
// every stage's scratch buffers and the cuBLAS workspace (cuBLAS is handed a
// tracked workspace with cublasSetWorkspace, see cublas_handle.h). What is not:
// the CUDA context and the module images of the kernels, which do not depend on
// N, D or V.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace cce {

// Counts per device: a process that drives several GPUs (stage 11) reads
// each GPU's peak on its own. Without an argument: the current device.
class AllocationTracker {
 public:
  static void* allocate(size_t bytes);  // cudaMalloc on the current device, counted; throws on failure
  static void release(void* ptr, size_t bytes);
  static size_t current_bytes(int device = -1);
  static size_t peak_bytes(int device = -1);
  // Starts a new measurement window on every device: peak := current.
  static void reset_peak();
  // Where the memory comes from: cudaMalloc, unless a host program that owns
  // the device memory hands in its own pair (python/: PyTorch's caching
  // allocator). Only before the first allocation (throws InputError after).
  using AllocateFn = void* (*)(size_t bytes, int device);
  using ReleaseFn = void (*)(void* ptr, int device);
  static void set_source(AllocateFn allocate, ReleaseFn release);
  // From now on releases of the source's memory do nothing (the host program
  // is shutting down and its allocator with it).
  static void detach_source();
};

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) ptr_ = static_cast<T*>(AllocationTracker::allocate(count_ * sizeof(T)));
  }
  // Someone else's device memory (a PyTorch tensor's), seen as a buffer: not
  // counted by the tracker and never freed here.
  static DeviceBuffer borrow(T* ptr, size_t count) {
    DeviceBuffer b;
    b.ptr_ = ptr, b.count_ = count, b.owned_ = false;
    return b;
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)),
        owned_(std::exchange(other.owned_, true)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      count_ = std::exchange(other.count_, 0);
      owned_ = std::exchange(other.owned_, true);
    }
    return *this;
  }

  void reset() {
    if (ptr_ != nullptr && owned_) AllocationTracker::release(ptr_, count_ * sizeof(T));
    ptr_ = nullptr;
    count_ = 0;
    owned_ = true;
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
  bool owned_ = true;
};

// Fills `bytes` bytes at `ptr` with 0xFF: every float and bf16 then reads as NaN,
// so an output element a kernel forgot to write fails the comparison.
void poison_device(void* ptr, size_t bytes, cudaStream_t stream = nullptr);

// Copies between host vectors and device buffers (checked, synchronous).
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);

// What a probe of CUDA device 0 finds. kMissing: the hardware or software is
// not there (no NVIDIA driver loaded, no device, or a GPU older than sm_80),
// which the executables and tests report as skipped. kBroken: a GPU is there
// but CUDA cannot use it (a driver older than the runtime, any other error),
// which is a failure, never a skip: it must not read as "no GPU".
enum class GpuState { kUsable, kMissing, kBroken };

// The classification alone, from what the CUDA calls returned: the status and
// count of cudaGetDeviceCount, cudaDriverGetVersion's version (0: no driver
// loaded) and device 0's compute capability major (read only when there is a
// device). Pure, so that it is tested without a GPU.
GpuState classify_gpu(cudaError_t count_status, int count, int driver_version, int major);

// Probes device 0 and classifies it; `why` says why it is not usable, in words
// without a colon ("no CUDA GPU found", ...), so that scripts/test.sh can pick
// it out of a skip message.
GpuState probe_gpu(std::string* why = nullptr);

// True when probe_gpu() finds a usable device. For callers that only size
// things by it; a decision to skip or fail must use probe_gpu, so that a
// broken GPU fails instead of skipping.
bool cuda_device_available(std::string* why = nullptr);

}  // namespace cce
