// One value in page-locked host memory that a kernel writes and the host reads
// once the stream has passed that kernel: a flag or an index comes back with no
// copy queued behind it. With unified addressing the host pointer is also the
// device's, on every device (portable). The object that reads it owns it (a
// stage object, a C interface handle), so that objects used on other devices
// or host threads never share one. Made on first use (a stage object is also
// made where there is no GPU), freed with its owner.
#pragma once

#include <cuda_runtime.h>

#include "common/check.h"

namespace cce {

template <typename T>
class MappedHostValue {
 public:
  MappedHostValue() = default;
  MappedHostValue(const MappedHostValue&) = delete;
  MappedHostValue& operator=(const MappedHostValue&) = delete;
  ~MappedHostValue() {
    if (value_ != nullptr) cudaFreeHost(value_);  // no throwing from a destructor
  }
  T* get() {
    if (value_ == nullptr) {
      void* made = nullptr;
      CCE_CUDA_CHECK(cudaHostAlloc(&made, sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable));
      value_ = static_cast<T*>(made);
    }
    return value_;
  }
  // The value set to `start` for a kernel queued next to write.
  T* reset(T start = T{}) {
    *get() = start;
    return value_;
  }

 private:
  T* value_ = nullptr;
};

}  // namespace cce
