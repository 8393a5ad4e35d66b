// The sparse plan's dense head: the sorted vocabulary's leading tiles that
// most token blocks keep, taken whole by cuBLAS's GEMMs (plan_per_batch.h).
#include <algorithm>

#include "common/check.h"
#include "common/device_math.cuh"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce::s10 {
namespace {

constexpr int kThreads = 256;

// The head: the leading tiles each kept by at least min_count token blocks,
// none if fewer than kLeastHeadTiles.
__global__ void head_length_kernel(const int* __restrict__ kept_counts, int64_t tiles, int64_t min_count,
                                   int* __restrict__ head) {
  int64_t length = 0;
  while (length < tiles && kept_counts[length] >= min_count) ++length;
  *head = length >= kLeastHeadTiles ? static_cast<int>(length) : 0;
}

// Every pair of the head's tiles kept: no tail correction and no dropped
// target there, and its tiles' counts say so to the decision's read-back.
__global__ void keep_head_kernel(const int* __restrict__ head, int64_t token_blocks, uint8_t* __restrict__ keep,
                                 int* __restrict__ kept_counts) {
  const int64_t tile = blockIdx.x;
  if (tile >= *head) return;
  for (int64_t b = threadIdx.x; b < token_blocks; b += blockDim.x) keep[tile * token_blocks + b] = 1;
  if (threadIdx.x == 0) kept_counts[tile] = static_cast<int>(token_blocks);
}

// dC[order[first + r]] = the slab's fp32 row r, rounded once to the output's type.
template <typename T>
__global__ void scatter_sorted_rows_kernel(const float* __restrict__ rows, const int* __restrict__ order,
                                           int64_t first, int64_t d, T* __restrict__ dc) {
  const int64_t r = blockIdx.x;
  T* dst = dc + static_cast<int64_t>(order[first + r]) * d;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) dst[k] = from_float<T>(rows[r * d + k]);
}

}  // namespace

DenseSlabs dense_head_slabs(const Problem& p) { return plan_dense_slabs(p, slab_columns_within(p, kHeadSlabBytes)); }

std::vector<MemoryItem> dense_head_items(const Problem& p, bool with_dc) {
  const DenseSlabs slabs = dense_head_slabs(p);
  std::vector<MemoryItem> items = {{kHeadSlabItem, static_cast<size_t>(p.n * slabs.pitch) * 4},
                                   {kHeadRowsItem, static_cast<size_t>(slabs.columns * p.d) * p.element_bytes()}};
  if (with_dc) items.push_back({kHeadDcItem, static_cast<size_t>(slabs.columns * p.d) * 4});
  return items;
}

const int* mark_dense_head(const DropPlan& plan, const s09::BackwardBuffers& buffers, double share, int* head,
                           HostTables& host, cudaStream_t stream) {
  const auto min_count = static_cast<int64_t>(share * static_cast<double>(plan.token_blocks) + 0.999999);
  head_length_kernel<<<1, 1, 0, stream>>>(buffers.kept_counts, plan.tiles, std::max<int64_t>(min_count, 1), head);
  CCE_CHECK_LAUNCH();
  keep_head_kernel<<<static_cast<unsigned>(plan.tiles), kThreads, 0, stream>>>(head, plan.token_blocks, buffers.keep,
                                                                              buffers.kept_counts);
  CCE_CHECK_LAUNCH();
  int* on_host = host.read_back.take<int>(1);
  CCE_CUDA_CHECK(cudaMemcpyAsync(on_host, head, sizeof(int), cudaMemcpyDeviceToHost, stream));
  return on_host;
}

void dense_head_backward(const DeviceInputs& in, const DropPlan& plan, const s09::BackwardBuffers& buffers,
                         int64_t head_tiles, const Scratch& scratch, const float* lse, float* de_acc, void* dc,
                         cudaStream_t stream) {
  const Problem& p = in.problem;
  const DenseSlabs slabs = dense_head_slabs(p);
  const int64_t head_columns = std::min(head_tiles * plan.tile_cols, p.v);
  const s08::TileStatistics& forward = buffers.forward.kept;
  float* slab = scratch.get<float>(kHeadSlabItem);
  void* rows = scratch.get<void>(kHeadRowsItem);
  float* dc_rows = dc != nullptr ? scratch.get<float>(kHeadDcItem) : nullptr;
  for (int64_t first = 0; first < head_columns; first += slabs.columns) {
    const int64_t count = std::min(slabs.columns, head_columns - first);
    const auto blocks = static_cast<unsigned>(count);
    copy_rows_by_index(p, in.c.get(), forward.vocabulary_order + first, count, rows, stream);
    // Column j of the slab is sorted position first + j; the targets as sorted positions (−1: ignored).
    const SlabColumns columns{in.e.get(), rows, first, count, forward.target_position, de_acc, true, dc_rows};
    slab_gradient_products(p, columns, lse, buffers.grad_scale, slab, slabs.pitch, stream);
    if (dc_rows == nullptr) continue;
    if (p.dtype == Dtype::kBFloat16)
      scatter_sorted_rows_kernel<<<blocks, kThreads, 0, stream>>>(dc_rows, forward.vocabulary_order, first, p.d,
                                                                 static_cast<__nv_bfloat16*>(dc));
    else
      scatter_sorted_rows_kernel<<<blocks, kThreads, 0, stream>>>(dc_rows, forward.vocabulary_order, first, p.d,
                                                                 static_cast<float*>(dc));
    CCE_CHECK_LAUNCH();
  }
}

}  // namespace cce::s10
