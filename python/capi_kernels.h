// The C interface's own kernels (capi_kernels.cu), for cce_capi.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/mapped_value.h"
#include "common/problem.h"

namespace cce {

// What the targets' check leaves for the host: the first bad position (page-
// locked) and the event after the check. One per C interface handle, made on
// the device of its first check (a handle runs on one device).
struct TargetCheckSlots {
  MappedHostValue<unsigned long long> first;
  cudaEvent_t done = nullptr;
  TargetCheckSlots() = default;
  TargetCheckSlots(const TargetCheckSlots&) = delete;
  TargetCheckSlots& operator=(const TargetCheckSlots&) = delete;
  ~TargetCheckSlots();
};
// The targets' check in two halves: start copies them into
// `safe` [n] with every one neither ignore_index nor in [0, v) replaced by
// ignore_index, on the stream; finish waits for that copy alone and throws
// InputError naming the first such target.
struct TargetCheck {
  const int64_t* targets;
  int64_t n, v, ignore_index;
  unsigned long long* first;
  cudaEvent_t done;
};
TargetCheck start_target_check(const int64_t* targets, int64_t n, int64_t v, int64_t ignore_index, int64_t* safe,
                               TargetCheckSlots& slots, cudaStream_t stream);
void finish_target_check(const TargetCheck& check);
// a [a_count] and b [b_count] (b may be null) in dtype *= *g (on the device), in
// one launch, skipped on the device when *g is 1.
void scale_in_place(void* a, int64_t a_count, void* b, int64_t b_count, Dtype dtype, const float* g,
                    cudaStream_t stream);
}  // namespace cce
