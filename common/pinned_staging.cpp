#include "common/pinned_staging.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"

namespace cce {

namespace {
constexpr size_t kAlign = 256;           // every region starts 256-byte aligned, as cudaMalloc's do
constexpr size_t kLeastBlock = 1 << 20;  // 1 MiB: most stages' tables fit one block
size_t round_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
}  // namespace

PinnedStaging::~PinnedStaging() {
  for (Block& b : blocks_) cudaFreeHost(b.base);  // no throwing from a destructor
}

void* PinnedStaging::take_bytes(size_t bytes) {
  bytes = round_up(std::max<size_t>(bytes, 1));
  for (Block& b : blocks_) {
    if (b.size - b.used >= bytes) {
      void* region = b.base + b.used;
      b.used += bytes;
      return region;
    }
  }
  // A new block; the old ones stay where they are (regions already handed out live there).
  Block b;
  b.size = std::max({bytes, kLeastBlock, blocks_.empty() ? size_t{0} : 2 * blocks_.back().size});
  CCE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&b.base), b.size));
  b.used = bytes;
  blocks_.push_back(b);
  return b.base;
}

void PinnedStaging::send(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  void* region = take_bytes(bytes);
  std::memcpy(region, src, bytes);
  CCE_CUDA_CHECK(cudaMemcpyAsync(dst, region, bytes, cudaMemcpyHostToDevice, stream));
}

void PinnedStaging::reset() {
  // Nothing is in use now: blocks are merged into one of their total size, so
  // that a steady state takes every region from one block.
  if (blocks_.size() > 1) {
    size_t total = 0;
    for (Block& b : blocks_) {
      total += b.size;
      CCE_CUDA_CHECK(cudaFreeHost(b.base));
    }
    blocks_.clear();
    Block b;
    b.size = total;
    CCE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&b.base), b.size));
    blocks_.push_back(b);
  }
  for (Block& b : blocks_) b.used = 0;
}

}  // namespace cce
