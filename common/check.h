// Error checking for CUDA and cuBLAS calls.
//
// Every CUDA runtime and cuBLAS call in this repository goes through one of the
// macros below. A failure prints the failing call's text, file and line and
// throws cce::CudaError, which the stage drivers turn into a non-zero exit.
// These are not asserts: they stay on in Release builds.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace cce {

// A CUDA or cuBLAS call failed: the device is in an unexpected state.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bad input from the user: wrong shapes, out-of-range targets, bad flags,
// missing or malformed files. Drivers report the message and exit with 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(const char* call, const char* what, const char* file, int line);
const char* cublas_status_name(cublasStatus_t status);

// What the repository keeps once per device (cuBLAS handles, the tile
// engine's facts, the C interface's turns) it keeps in arrays of this many:
// a process may drive several GPUs.
constexpr int kMaxDevices = 64;
// The current device's index, checked to be below kMaxDevices (CudaError else).
int current_device_index();

// Lets `kernel` launch with `bytes` of dynamic shared memory on the current
// device. cudaFuncSetAttribute costs microseconds of host time, which the GPU
// waits for where the host is the slower side (the small kernels before a
// forward, the decision's wait): the limit set is remembered per (kernel, device).
void allow_dynamic_shared_memory(const void* kernel, size_t bytes);
template <class Kernel>
void allow_dynamic_shared_memory(Kernel* kernel, size_t bytes) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
}

// Whether `kernel` may be launched as a programmatic dependent launch on the current device
// (common/dependent_launch.cuh): the device is sm_90 or newer and the kernel's binary was built for sm_90 or
// newer, so its griddepcontrol.wait is there. Asked once per (kernel, device).
bool dependent_launch_allowed(const void* kernel);

}  // namespace cce

#define CCE_CUDA_CHECK(call)                                                          \
  do {                                                                                \
    cudaError_t cce_status_ = (call);                                                 \
    if (cce_status_ != cudaSuccess)                                                   \
      ::cce::throw_cuda_error(#call, cudaGetErrorString(cce_status_), __FILE__, __LINE__); \
  } while (0)

#define CCE_CUBLAS_CHECK(call)                                                        \
  do {                                                                                \
    cublasStatus_t cce_status_ = (call);                                              \
    if (cce_status_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::cce::throw_cuda_error(#call, ::cce::cublas_status_name(cce_status_), __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: catches bad launch configurations at once (the kernel's
// own faults surface at the next synchronizing call, which is checked too).
#define CCE_CHECK_LAUNCH() CCE_CUDA_CHECK(cudaGetLastError())
