// Programmatic dependent launch (Hopper, sm_90): a small kernel in a chain of small kernels may start before the
// kernel ahead of it in the stream has ended, and waits for it on the device. Launched plainly, a chain of
// small kernels that the host has queued long before still costs about 2.1 µs a kernel on one H200, dependent
// 1.2 µs (docs/profiles/session45_h200/chain_bench.cu); stage 10 runs about 20 of them after its forward.
//
// Two halves, used together:
//   - the kernel calls wait_for_kernel_ahead() before it reads or writes global memory;
//   - the host launches it with launch_dependent(kernel, grid, block, stream, args...).
// A kernel whose first line is the wait may also be launched plainly (the wait is then a no-op), and
// launch_dependent launches plainly where the wait is not in the kernel's binary (built below sm_90) or the
// device is older.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "common/check.h"

namespace cce {

// Lets the stream's next kernel launch now (it will wait in its own call of this function), then waits until
// the kernel ahead has finished and its writes are visible. Nothing before it touches global memory, so the
// stream's order is kept for every kernel that calls it first.
__device__ __forceinline__ void wait_for_kernel_ahead() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute dependent{};
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  config.attrs = &dependent;
  config.numAttrs = dependent_launch_allowed(reinterpret_cast<const void*>(kernel)) ? 1 : 0;
  CCE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace cce
