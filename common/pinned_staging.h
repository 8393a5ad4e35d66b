// Page-locked host memory for the small tables a stage exchanges with the GPU
// on every call (per-tile counts, per-block lists, launch plans).
//
// Why: cudaMemcpyAsync to or from pageable memory is not asynchronous. From
// pageable memory it first waits for the stream to drain; into it, it returns
// only when the copy is done. Either way the host stops, and every launch
// after it starts with the GPU idle. From page-locked memory the copy is queued
// like a kernel, and the host runs on ahead.
//
// The price is a rule on lifetimes: the GPU reads or writes the memory some
// time after the call that queued the copy. So regions are handed out one
// after another, never move, and are all taken back at once by reset(), which
// the owner calls only where the stream has passed every copy it queued from
// or into them (right after a cudaStreamSynchronize of that stream).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace cce {

class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // `count` elements, uninitialized, valid until reset().
  template <typename T>
  T* take(size_t count) {
    return static_cast<T*>(take_bytes(count * sizeof(T)));
  }
  // Queues a copy of `bytes` bytes at `src` (any host memory) to `dst` on the
  // device, through a region of its own: `src` may go when this returns.
  void send(void* dst, const void* src, size_t bytes, cudaStream_t stream);
  // Every region back; the next take() may reuse them.
  void reset();

 private:
  struct Block {
    char* base = nullptr;
    size_t size = 0, used = 0;
  };
  void* take_bytes(size_t bytes);
  std::vector<Block> blocks_;
};

// A view of `count` elements at `ptr` (host memory owned elsewhere, e.g. by a
// PinnedStaging): what the host code reads like a vector.
template <typename T>
struct HostSpan {
  T* ptr = nullptr;
  size_t count = 0;
  T* data() const { return ptr; }
  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  T* begin() const { return ptr; }
  T* end() const { return ptr + count; }
  T& operator[](size_t i) const { return ptr[i]; }
  T& back() const { return ptr[count - 1]; }
};

}  // namespace cce
