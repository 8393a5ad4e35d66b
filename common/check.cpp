#include "common/check.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

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

void allow_dynamic_shared_memory(const void* kernel, size_t bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> allowed;  // (kernel, device) -> the limit set there
  const int device = current_device_index();
  std::lock_guard<std::mutex> lock(mutex);
  size_t& limit = allowed[{kernel, device}];
  if (limit >= bytes) return;
  CCE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  limit = bytes;
}

bool dependent_launch_allowed(const void* kernel) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, bool> allowed;  // (kernel, device) -> the answer
  const int device = current_device_index();
  std::lock_guard<std::mutex> lock(mutex);
  const auto known = allowed.find({kernel, device});
  if (known != allowed.end()) return known->second;
  int major = 0;
  CCE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  cudaFuncAttributes attributes{};
  CCE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return allowed[{kernel, device}] = major >= 9 && attributes.binaryVersion >= 90;
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
