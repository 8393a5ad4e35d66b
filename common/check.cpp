#include "common/check.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

namespace cce {

void throw_cuda_error(const char* call, const char* what, const char* file, int line) {
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what;
  throw CudaError(msg);
}

int current_device_index() {
  int device = 0;
  CCE_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices)
    throw CudaError("device " + std::to_string(device) + " is beyond the " + std::to_string(kMaxDevices) +
                    " this build keeps state for");
  return device;
}

namespace {
// What the launches ask about a kernel on a device, asked once and kept for the
// process: the answers cost microseconds of host time on every call otherwise.
// `update(value, device)` runs under the device's own lock; an exception leaves
// the value as it was. One lock per device, not one for all: under lazy module
// loading the driver call in `update` can wait for that GPU to finish what it
// runs, and in stage 11 that may be a collective waiting for another GPU, whose
// thread must not then wait for this lock.
template <typename T>
class PerKernelAndDevice {
 public:
  template <class Update>
  auto with(const void* kernel, Update&& update) {
    const int device = current_device_index();
    PerDevice& mine = devices_[device];
    std::lock_guard<std::mutex> lock(mine.mutex);
    return update(mine.values[kernel], device);
  }

 private:
  struct PerDevice {
    std::mutex mutex;
    std::map<const void*, T> values;
  };
  PerDevice devices_[kMaxDevices];
};
}  // namespace

void allow_dynamic_shared_memory(const void* kernel, size_t bytes) {
  static PerKernelAndDevice<size_t> limits;  // the limit set there
  limits.with(kernel, [&](size_t& limit, int) {
    if (limit >= bytes) return;
    CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    limit = bytes;
  });
}

bool dependent_launch_allowed(const void* kernel) {
  static PerKernelAndDevice<std::optional<bool>> answers;
  return answers.with(kernel, [&](std::optional<bool>& allowed, int device) {
    if (!allowed) {
      int major = 0;
      CCE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
      cudaFuncAttributes attributes{};
      CCE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
      allowed = major >= 9 && attributes.binaryVersion >= 90;
    }
    return *allowed;
  });
}

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

}  // namespace cce
