#include "stages/04_indexed_dot/indexed_dot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/driver.h"
#include "common/timer.h"
#include "common/token_reduction.h"

namespace cce::s04 {
namespace {

constexpr int kFinalizeThreads = 256;
constexpr int kCompareIters = 20;
constexpr int kCompareWarmup = 2;
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
  const T* c_row = c + t * d;  // int64: t·D and i·D can exceed 2^31
  const T* e_row = e + i * d;
  float sum = 0.0f;
  for (int64_t begin = blockIdx.y * kSliceD; begin < d; begin += gridDim.y * kSliceD)
    sum += lane_partial_dot<T, kVec>(c_row, e_row, begin, min(begin + kSliceD, d), lane);
  sum = warp_reduce_sum(sum);
  if (lane == 0) atomicAdd(dot + i, sum);
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
  const s03::VocabSplit s = s03::plan_vocab_split(p);
  std::vector<MemoryItem> items = {{"range (max, sum) S*N", static_cast<size_t>(s.splits * p.n) * sizeof(float2)},
                                   {"target dot", static_cast<size_t>(p.n) * 4}};
  if (p.reduction != Reduction::kNone) items.push_back({"per-token loss", static_cast<size_t>(p.n) * 4});
  return items;
}

void IndexedDotStage::add_options(OptionParser& parser) {
  parser.add_string("variant", &variant_text_,
                    "indexed dot: 2d (token blocks x D slices, atomics) or 1d (a warp per token over all of D)");
  parser.add_flag("compare-variants", &compare_variants_,
                  "time both indexed-dot kernels alone (median of 20) and compare their results");
}

void IndexedDotStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  variant_ = parse_dot_variant(variant_text_);
  problem_ = p;
  if (sms_ == 0) {
    int device = 0;
    CCE_CUDA_CHECK(cudaGetDevice(&device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
  }
  split_ = s03::plan_vocab_split(p);
  if (partial_.size() != static_cast<size_t>(split_.splits * p.n)) partial_ = DeviceBuffer<float2>(split_.splits * p.n);
  if (dot_.size() != static_cast<size_t>(p.n)) dot_ = DeviceBuffer<float>(p.n);
  const bool reduce = p.reduction != Reduction::kNone;
  if (reduce && loss_per_token_.size() != static_cast<size_t>(p.n)) loss_per_token_ = DeviceBuffer<float>(p.n);

  // A diagnostic, run once and only on request; every later call is the plain forward.
  if (compare_variants_ && !comparison_.done) compare_variants(in, stream);

  s03::fused_lse_and_loss(in, split_, partial_.get(), nullptr, lse, nullptr, stream);  // LSE only
  indexed_dot(in, variant_, dot_.get(), stream);
  float* per_token = reduce ? loss_per_token_.get() : loss;
  finalize_token_loss(p, in.targets.get(), lse, dot_.get(), per_token, stream);
  if (reduce) reduce_token_losses(p, per_token, in.targets.get(), loss, stream);
}

void IndexedDotStage::compare_variants(const DeviceInputs& in, cudaStream_t stream) {
  const Problem& p = in.problem;
  const size_t dot_bytes = static_cast<size_t>(p.n) * sizeof(float);
  // Self-check: both variants into the same scratch, one after the other (no
  // second buffer, so the memory model stays that of the plain forward).
  std::vector<float> dot_2d(p.n), dot_1d(p.n);
  indexed_dot(in, DotVariant::k2d, dot_.get(), stream);
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  copy_to_host(dot_2d.data(), dot_.get(), dot_bytes);
  indexed_dot(in, DotVariant::k1d, dot_.get(), stream);
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  copy_to_host(dot_1d.data(), dot_.get(), dot_bytes);
  VariantComparison& r = comparison_;
  r.max_abs_diff = r.max_abs_dot = 0;
  for (int64_t i = 0; i < p.n; ++i) {
    const double diff = std::fabs(static_cast<double>(dot_2d[i]) - dot_1d[i]);
    r.max_abs_diff = std::isnan(diff) ? INFINITY : std::max(r.max_abs_diff, diff);  // a NaN must not hide
    r.max_abs_dot = std::max(r.max_abs_dot, std::fabs(static_cast<double>(dot_1d[i])));
  }

  // What both kernels must read at least: row t_i of C and row i of E per valid token.
  std::vector<int64_t> targets(p.n);
  copy_to_host(targets.data(), in.targets.get(), static_cast<size_t>(p.n) * sizeof(int64_t));
  r.bytes_read = 2.0 * static_cast<double>(count_valid_targets(p, targets)) * static_cast<double>(p.d) *
                 static_cast<double>(p.element_bytes());

  // Each kernel alone, not the LSE. The 2d variant's zeroing of dot is part of its cost.
  r.ms_2d = time_median_ms([&] { indexed_dot(in, DotVariant::k2d, dot_.get(), stream); }, kCompareIters,
                           kCompareWarmup, stream);
  r.ms_1d = time_median_ms([&] { indexed_dot(in, DotVariant::k1d, dot_.get(), stream); }, kCompareIters,
                           kCompareWarmup, stream);
  r.done = true;
}

void IndexedDotStage::backward(const DeviceInputs&, const float*, const float*, void*, void*, cudaStream_t) {
  throw InputError("stage 04 computes the forward only; the fused backward comes in stage 06");
}

std::vector<std::string> IndexedDotStage::report_lines() const {
  if (problem_.n == 0) return {};  // no forward yet
  std::vector<std::string> lines;
  char buf[256];
  std::snprintf(buf, sizeof buf, "lse grid     %lld token blocks x %lld vocabulary ranges (stage 03, LSE only)",
                static_cast<long long>(split_.token_blocks), static_cast<long long>(split_.splits));
  lines.push_back(buf);
  std::snprintf(buf, sizeof buf,
                "indexed dot  --variant %s; %d threads per block = %d tokens, a warp each; 2d: D in slices of %lld",
                to_string(variant_), kDotThreads, kTokensPerBlock, static_cast<long long>(kSliceD));
  lines.push_back(buf);
  const DotGrid g2 = plan_indexed_dot(problem_, DotVariant::k2d), g1 = plan_indexed_dot(problem_, DotVariant::k1d);
  std::snprintf(buf, sizeof buf,
                "indexed dot  2d grid: %lld x %lld = %lld blocks on %d SMs (%.1f per SM); 1d grid: %lld blocks "
                "(%.1f per SM)",
                static_cast<long long>(g2.token_blocks), static_cast<long long>(g2.d_slices),
                static_cast<long long>(g2.blocks()), sms_, static_cast<double>(g2.blocks()) / sms_,
                static_cast<long long>(g1.blocks()), static_cast<double>(g1.blocks()) / sms_);
  lines.push_back(buf);
  if (comparison_.done) {
    const VariantComparison& r = comparison_;
    auto gb_per_s = [&](double ms) { return ms > 0 ? r.bytes_read / (ms * 1e6) : 0.0; };
    std::snprintf(buf, sizeof buf, "compare      2d  %.4f ms  %7.1f GB/s  (zeroing dot included)", r.ms_2d,
                  gb_per_s(r.ms_2d));
    lines.push_back(buf);
    std::snprintf(buf, sizeof buf, "compare      1d  %.4f ms  %7.1f GB/s", r.ms_1d, gb_per_s(r.ms_1d));
    lines.push_back(buf);
    std::snprintf(buf, sizeof buf,
                  "compare      medians of %d runs after %d warm-up; bytes read %s (rows of C and E, valid tokens)",
                  kCompareIters, kCompareWarmup, format_mb(static_cast<size_t>(r.bytes_read)).c_str());
    lines.push_back(buf);
    // The two sum in different orders: expect differences at fp32 rounding level.
    const bool agree = r.max_abs_diff <= 1e-4 * std::max(1.0, r.max_abs_dot);
    std::snprintf(buf, sizeof buf, "self-check   max |dot_2d - dot_1d| = %.3g (max |dot| %.3g): %s", r.max_abs_diff,
                  r.max_abs_dot, agree ? "agree within rounding" : "DIFFER beyond rounding");
    lines.push_back(buf);
  }
  return lines;
}

void IndexedDotStage::release_workspace() {
  partial_.reset();
  dot_.reset();
  loss_per_token_.reset();
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<IndexedDotStage>(); }

}  // namespace cce::s04
