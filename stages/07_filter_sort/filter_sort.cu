#include "stages/07_filter_sort/filter_sort.h"

#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstdio>

#include "common/check.h"

namespace cce::s07 {
namespace {

__global__ void iota_kernel(int* __restrict__ x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = static_cast<int>(i);
}

// cub's scratch for sorting V (key, index) pairs. Without a device (the tour's
// memory table) cub cannot be asked: V·8 bytes plus 1 MiB is a safe estimate.
size_t sort_temp_bytes(int64_t v) {
  if (!cuda_device_available()) return static_cast<size_t>(v) * 8 + (size_t{1} << 20);
  size_t bytes = 0;
  CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, static_cast<const float*>(nullptr),
                                                           static_cast<float*>(nullptr), static_cast<const int*>(nullptr),
                                                           static_cast<int*>(nullptr), static_cast<int>(v)));
  return bytes;
}

}  // namespace

float default_filter_eps(Dtype dtype) { return dtype == Dtype::kBFloat16 ? std::ldexp(1.0f, -12) : std::ldexp(1.0f, -28); }

float FilterSortStage::filter_eps(Dtype dtype) const {
  if (no_filter_) return 0.0f;
  return filter_eps_flag_ > 0.0 ? static_cast<float>(filter_eps_flag_) : default_filter_eps(dtype);
}

void FilterSortStage::add_options(OptionParser& parser) {
  parser.add_double("filter-eps", &filter_eps_flag_, "skip backward tiles whose every |gradient| < eps; 0 = 2^-12 (bf16), 2^-28 (fp32)");
  parser.add_flag("no-filter", &no_filter_, "run every tile's backward products");
  parser.add_flag("no-sort", &no_sort_, "visit the vocabulary in its natural order");
}

void FilterSortStage::validate_options() const {
  if (!(filter_eps_flag_ >= 0.0 && filter_eps_flag_ < 1.0)) throw InputError("--filter-eps must be in [0, 1)");
  if (no_filter_ && filter_eps_flag_ > 0.0) throw InputError("--filter-eps and --no-filter contradict each other");
}

std::vector<MemoryItem> FilterSortStage::workspace(const Problem& p, bool backward) const {
  std::vector<MemoryItem> items = forward_stage_.workspace(p, false);
  const size_t v = static_cast<size_t>(p.v);
  if (!no_sort_) items.push_back({"column sums of logits [V]", v * 4});
  if (backward) {
    if (!no_sort_) {
      items.push_back({"sorted sums [V]", v * 4});
      items.push_back({"vocabulary order [V] + identity [V]", v * 8});
      items.push_back({"sort scratch", sort_temp_bytes(p.v)});
    }
    for (auto& item : s06::backward_workspace(p)) items.push_back(item);
  }
  return items;
}

void FilterSortStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  last_dtype_ = p.dtype;
  if (!no_sort_ && column_sums_.size() != static_cast<size_t>(p.v)) column_sums_ = DeviceBuffer<float>(p.v);
  forward_stage_.accumulate_column_sums(no_sort_ ? nullptr : column_sums_.get());
  forward_stage_.forward(in, loss, lse, stream);
}

void FilterSortStage::sort_vocabulary(const Problem& p, cudaStream_t stream) {
  const size_t v = static_cast<size_t>(p.v);
  if (sorted_sums_.size() != v) sorted_sums_ = DeviceBuffer<float>(v);
  if (identity_.size() != v) identity_ = DeviceBuffer<int>(v);
  if (order_.size() != v) order_ = DeviceBuffer<int>(v);
  size_t temp = sort_temp_bytes(p.v);
  if (sort_temp_.size() != temp) sort_temp_ = DeviceBuffer<uint8_t>(temp);
  constexpr int kThreads = 256;
  iota_kernel<<<static_cast<unsigned>((p.v + kThreads - 1) / kThreads), kThreads, 0, stream>>>(identity_.get(), p.v);
  CCE_CHECK_LAUNCH();
  // Descending Σ_i z_ij is descending average logit (same N for every entry).
  CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(sort_temp_.get(), temp, column_sums_.get(),
                                                           sorted_sums_.get(), identity_.get(), order_.get(),
                                                           static_cast<int>(p.v), 0, 32, stream));
}

void FilterSortStage::backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                               cudaStream_t stream) {
  const Problem& p = in.problem;
  s06::BackwardOptions options;
  options.filter_eps = filter_eps(p.dtype);
  if (!no_sort_) {
    if (column_sums_.size() != static_cast<size_t>(p.v)) throw InputError("stage 07: backward() before forward()");
    sort_vocabulary(p, stream);
    options.vocab_order = order_.get();
  }
  backward_.run(in, lse, upstream, de, dc, options, stream);
}

std::vector<std::string> FilterSortStage::report_lines() const {
  std::vector<std::string> lines = forward_stage_.report_lines();
  const s06::BackwardStats s = backward_.stats();
  char buf[200];
  const float eps = filter_eps(last_dtype_);
  std::snprintf(buf, sizeof buf, "filter       %s; vocabulary %s", eps > 0 ? ("eps " + std::to_string(eps)).c_str() : "off",
                no_sort_ ? "in natural order" : "sorted by average logit (descending)");
  lines.push_back(buf);
  if (s.tiles > 0) {
    std::snprintf(buf, sizeof buf, "kept tiles   %lld of %lld (%.2f%%) ran the backward products",
                  static_cast<long long>(s.kept_tiles), static_cast<long long>(s.tiles),
                  100.0 * static_cast<double>(s.kept_tiles) / static_cast<double>(s.tiles));
    lines.push_back(buf);
  }
  return lines;
}

void FilterSortStage::release_workspace() {
  forward_stage_.release_workspace();
  backward_.release();
  column_sums_.reset();
  sorted_sums_.reset();
  identity_.reset();
  order_.reset();
  sort_temp_.reset();
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<FilterSortStage>(); }

}  // namespace cce::s07
