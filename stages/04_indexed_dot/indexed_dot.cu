#include "stages/04_indexed_dot/indexed_dot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/token_reduction.h"

namespace cce::s04 {
namespace {

constexpr int kFinalizeThreads = 256;
constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y

// kVec consecutive elements moved by one load instruction (16 bytes at most).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Packed {
  T values[kVec];
};

// This lane's share of Σ_{k ∈ [begin, end)} C_t[k]·E_i[k], accumulated in fp32.
// Lane l reads the kVec elements at begin + kVec·l, then 32·kVec further on,
// and so on: each step the warp reads one contiguous run of 32·kVec elements of
// each row (coalesced). begin and end are multiples of kVec (kVec divides D and
// kSliceD), so no pack reaches past end.
template <typename T, int kVec>
__device__ __forceinline__ float lane_partial_dot(const T* __restrict__ c_row, const T* __restrict__ e_row,
                                                  int64_t begin, int64_t end, int lane) {
  using Pack = Packed<T, kVec>;
  float sum = 0.0f;
  // Unrolled so that several loads are in flight before the first FMA waits.
#pragma unroll 4
  for (int64_t k = begin + static_cast<int64_t>(lane) * kVec; k < end; k += 32 * kVec) {
    const Pack c = *reinterpret_cast<const Pack*>(c_row + k);
    const Pack e = *reinterpret_cast<const Pack*>(e_row + k);
#pragma unroll
    for (int j = 0; j < kVec; ++j) sum = fmaf(to_float(c.values[j]), to_float(e.values[j]), sum);
  }
  return sum;
}

// 2d: grid (token blocks, D slices). Warp w of block (x, y) owns token
// i = 8x + w and the D slices y, y + gridDim.y, ... (more than one only when D
// has more than 65535 slices). Its partial sum is added into dot[i], which
// other blocks of the same token add into as well: hence atomicAdd, and dot
// zeroed before the launch.
template <typename T, int kVec>
__global__ void __launch_bounds__(kDotThreads)
    indexed_dot_2d_kernel(const T* __restrict__ e, const T* __restrict__ c, const int64_t* __restrict__ targets,
                          int64_t n, int64_t d, int64_t ignore_index, float* __restrict__ dot) {
  const int lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kTokensPerBlock + threadIdx.x / 32;
  if (i >= n) return;  // the last block's spare warps
  const int64_t t = targets[i];
  // The whole warp leaves together (i and t are the same on every lane), so the
  // shuffles below stay full-warp; C is never indexed with ignore_index.
  if (t == ignore_index) return;
  // EXERCISE(the partial dot and its atomic): this block's D slices, a warp sum, one atomicAdd
  const T* c_row = c + t * d;  // int64: t·D and i·D can exceed 2^31
  const T* e_row = e + i * d;
  float sum = 0.0f;
  for (int64_t begin = blockIdx.y * kSliceD; begin < d; begin += gridDim.y * kSliceD)
    sum += lane_partial_dot<T, kVec>(c_row, e_row, begin, min(begin + kSliceD, d), lane);
  sum = warp_reduce_sum(sum);
  if (lane == 0) atomicAdd(dot + i, sum);
  // END EXERCISE
}

// 1d: grid (token blocks). The same warp per token walks all of D and is the
// only writer of dot[i]: a plain store, 0 for an ignored token.
template <typename T, int kVec>
__global__ void __launch_bounds__(kDotThreads)
    indexed_dot_1d_kernel(const T* __restrict__ e, const T* __restrict__ c, const int64_t* __restrict__ targets,
                          int64_t n, int64_t d, int64_t ignore_index, float* __restrict__ dot) {
  const int lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kTokensPerBlock + threadIdx.x / 32;
  if (i >= n) return;
  const int64_t t = targets[i];
  float sum = 0.0f;
  if (t != ignore_index) sum = lane_partial_dot<T, kVec>(c + t * d, e + i * d, 0, d, lane);
  sum = warp_reduce_sum(sum);
  if (lane == 0) dot[i] = sum;
}

// One thread per token, after every partial sum has landed: the softcap is
// nonlinear, softcap(a + b) ≠ softcap(a) + softcap(b), so it can only be
// applied to the finished dot.
__global__ void finalize_token_loss_kernel(const float* __restrict__ lse, const float* __restrict__ dot,
                                           const int64_t* __restrict__ targets, int64_t n, int64_t ignore_index,
                                           float softcap, float* __restrict__ loss_per_token) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  loss_per_token[i] = targets[i] == ignore_index ? 0.0f : lse[i] - apply_softcap(dot[i], softcap);
}

bool is_aligned(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// The widest load, 16 bytes at most, that every row of E and C starts aligned
// for: row i starts i·D elements after the base, so the width must divide D.
// bf16 with D = 100 gets 4 elements (8 bytes); fp32 with D = 100 gets 4 (16 bytes).
template <typename T>
int widest_load(const DeviceInputs& in) {
  int width = 16 / static_cast<int>(sizeof(T));
  while (width > 1 && (in.problem.d % width != 0 || !is_aligned(in.e.get(), width * sizeof(T)) ||
                       !is_aligned(in.c.get(), width * sizeof(T))))
    width /= 2;
  return width;
}

// Calls f(std::integral_constant<int, width>{}), so that the kernels take the
// load width as a template argument (8 exists for bf16 only: 16 bytes).
template <typename T, typename F>
void with_load_width(int width, F&& f) {
  if constexpr (sizeof(T) == 2) {
    if (width == 8) return f(std::integral_constant<int, 8>{});
  }
  if (width >= 4) return f(std::integral_constant<int, 4>{});
  if (width == 2) return f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 1>{});
}

}  // namespace

DotVariant parse_dot_variant(const std::string& text) {
  if (text == "2d") return DotVariant::k2d;
  if (text == "1d") return DotVariant::k1d;
  throw InputError("--variant must be 2d or 1d, got '" + text + "'");
}

const char* to_string(DotVariant variant) { return variant == DotVariant::k2d ? "2d" : "1d"; }

DotGrid plan_indexed_dot(const Problem& p, DotVariant variant) {
  DotGrid g;
  g.token_blocks = (p.n + kTokensPerBlock - 1) / kTokensPerBlock;
  g.d_slices = variant == DotVariant::k2d ? std::min((p.d + kSliceD - 1) / kSliceD, kMaxGridY) : 1;
  return g;
}

void indexed_dot(const DeviceInputs& in, DotVariant variant, float* dot, cudaStream_t stream) {
  const Problem& p = in.problem;
  const DotGrid g = plan_indexed_dot(p, variant);
  const dim3 grid(static_cast<unsigned>(g.token_blocks), static_cast<unsigned>(g.d_slices));
  if (variant == DotVariant::k2d)
    CCE_CUDA_CHECK(cudaMemsetAsync(dot, 0, static_cast<size_t>(p.n) * sizeof(float), stream));
  dispatch_dtype(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* e = reinterpret_cast<const T*>(in.e.get());
    const T* c = reinterpret_cast<const T*>(in.c.get());
    with_load_width<T>(widest_load<T>(in), [&](auto width) {
      constexpr int kVec = decltype(width)::value;
      if (variant == DotVariant::k2d)
        indexed_dot_2d_kernel<T, kVec>
            <<<grid, kDotThreads, 0, stream>>>(e, c, in.targets.get(), p.n, p.d, p.ignore_index, dot);
      else
        indexed_dot_1d_kernel<T, kVec>
            <<<grid, kDotThreads, 0, stream>>>(e, c, in.targets.get(), p.n, p.d, p.ignore_index, dot);
      CCE_CHECK_LAUNCH();
    });
  });
}

void finalize_token_loss(const Problem& p, const int64_t* targets, const float* lse, const float* dot,
                         float* loss_per_token, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((p.n + kFinalizeThreads - 1) / kFinalizeThreads);
  finalize_token_loss_kernel<<<blocks, kFinalizeThreads, 0, stream>>>(lse, dot, targets, p.n, p.ignore_index,
                                                                       p.softcap, loss_per_token);
  CCE_CHECK_LAUNCH();
}

std::vector<MemoryItem> IndexedDotStage::workspace(const Problem& p, bool) const {
  return concat(concat(s03::fused_lse_scratch(p, s03::plan_fused(p), false), dot_scratch(p)), per_token_loss_scratch(p));
}

std::vector<MemoryItem> dot_scratch(const Problem& p) { return {{"target dot", static_cast<size_t>(p.n) * 4}}; }

void IndexedDotStage::add_options(OptionParser& parser) {
  parser.add_string("variant", &variant_text_,
                    "indexed dot: 2d (token blocks x D slices, atomics) or 1d (a warp per token over all of D)");
}

void IndexedDotStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  variant_ = parse_dot_variant(variant_text_);
  plan_ = s03::plan_fused(p);
  scratch_.allocate(workspace(p, false));
  s03::fused_lse(in, plan_, scratch_, lse, nullptr, stream);  // LSE only
  float* dot = scratch_.get<float>("target dot");
  indexed_dot(in, variant_, dot, stream);
  float* per_token = per_token_loss_buffer(p, loss, scratch_);
  finalize_token_loss(p, in.targets.get(), lse, dot, per_token, stream);
  finish_loss(p, per_token, in.targets.get(), loss, stream);
}

std::vector<std::string> IndexedDotStage::report_lines() const {
  if (plan_.units.token_blocks == 0) return {};  // no forward yet
  char buf[200];
  std::snprintf(buf, sizeof buf, "indexed dot  --variant %s; %d threads per block = %d tokens, a warp each; 2d: D in slices of %lld",
                to_string(variant_), kDotThreads, kTokensPerBlock, static_cast<long long>(kSliceD));
  return {"lse          " + s03::describe_plan(plan_) + " (stage 03, LSE only)", buf};
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<IndexedDotStage>(); }

}  // namespace cce::s04
