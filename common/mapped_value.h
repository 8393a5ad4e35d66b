// One value in page-locked host memory that a kernel writes and the host reads
// once the stream has passed that kernel: a flag or an index comes back with no
// copy queued behind it. With unified addressing the host pointer is also the
// device's. Each call site keeps its own (a function-local static), made on first
// use and kept for the process: freeing it at exit could run after the CUDA
// context has gone.
#pragma once

#include <cuda_runtime.h>

#include "common/check.h"

namespace cce {

template <typename T>
T* new_mapped_host_value() {
  void* made = nullptr;
  CCE_CUDA_CHECK(cudaHostAlloc(&made, sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable));
  return static_cast<T*>(made);
}

}  // namespace cce
