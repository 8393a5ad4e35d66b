// Exercise 07_filter_sort (README.md beside this file): generated from ../filter_sort.cu by
// scripts/exercise.py; write the EXERCISE blocks.
#include "common/exercise.h"
#include "stages/07_filter_sort/filter_sort.h"

#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstdio>

#include "common/check.h"
#include "common/radix_sort.cuh"
#include "common/tile/column_sums.cuh"
#include "common/tile/launch.cuh"
#include "common/tile/tile_path.cuh"
#include "stages/05_lse_locks/lse_locks.h"
#include "stages/05_lse_locks/locked_lse.cuh"
#include "stages/06_fused_backward/backward_tile.cuh"

namespace cce::s07 {
namespace {

// ------------------------------------------------------------------ forward
struct SortKeyParams {
  s05::LockedLseParams lse;
  float* column_sums;  // [V], zero before the launch: Σ_i z_ij over the rows i < N
};

// Stage 05's epilogue, plus each tile's column sums (of the logits as folded:
// softcapped; rows past N are zeros and add nothing) into column_sums. The
// warps' partial sums meet in shared memory first, a row per warp (plain
// stores: shared-memory float atomics are compare-and-swap loops), so that
// each column of a tile costs one global atomic per team, not one per warp.
template <class Frag>
struct SortKeyEpilogue {
  using Params = SortKeyParams;
  using Team = typename Frag::Team;
  static constexpr int kTeams = Frag::kBM / Frag::kTeamRows, kTeamWarps = Frag::kTeamThreads / 32;
  static constexpr size_t kSumsOffset = (s05::LockedLseEpilogue<Frag>::kSharedBytes + 15) / 16 * 16;
  static constexpr size_t kSharedBytes =
      kSumsOffset + static_cast<size_t>(kTeams) * kTeamWarps * Frag::kBN * sizeof(float);
  s05::LockedLseEpilogue<Frag> locked;
  float* column_sums;
  float* warp_sums;  // [kTeamWarps][kBN] of this team, zero between tiles
  int64_t v;

  __device__ SortKeyEpilogue(const Params& params, unsigned char* shared)
      : locked(params.lse, shared),
        column_sums(params.column_sums),
        warp_sums(reinterpret_cast<float*>(shared + kSumsOffset) +
                  (Frag::team_row0() / Frag::kTeamRows) * kTeamWarps * Frag::kBN),
        v(params.lse.v) {
    for (int i = Team::rank(); i < kTeamWarps * Frag::kBN; i += Team::size()) warp_sums[i] = 0.0f;
    // begin()'s barrier publishes the zeros.
  }
  __device__ void begin(const Unit& unit) { locked.begin(unit); }
  __device__ void tile(Frag& frag, const Unit& unit, int64_t col0) {
    locked.tile(frag, unit, col0);
    if constexpr (!Frag::kColumnsShareLaneMod4) {  // the fp32 tiles: each thread's own partial sums
      sum_tile_columns(frag, [&](int tile_col, float sum) {
        if (col0 + tile_col < v) atomicAdd(&column_sums[col0 + tile_col], sum);
      });
      return;
    }
    float* mine = warp_sums + (Team::rank() / 32) * Frag::kBN;
    sum_tile_columns(frag, [&](int tile_col, float sum) { mine[tile_col] = sum; });  // one lane per column
    Team::sync();
    for (int i = Team::rank(); i < Frag::kBN; i += Team::size()) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kTeamWarps; ++w) {
        sum += warp_sums[w * Frag::kBN + i];
        warp_sums[w * Frag::kBN + i] = 0.0f;
      }
      if (col0 + i < v) atomicAdd(&column_sums[col0 + i], sum);
    }
    Team::sync();  // the zeros are in place before the next tile's sums
  }
  __device__ void end(const Unit& unit) { locked.end(unit); }
};

// ----------------------------------------------------------------- backward
// Stage 06's tile backward over the sorted vocabulary (tile column p is
// vocabulary entry order[p]), skipping the products of a tile whose every
// unscaled gradient is below eps.
template <class Tile, typename T, bool kAligned>
__global__ void __launch_bounds__(256, 1)
    filtered_backward_kernel(const T* __restrict__ e, const T* __restrict__ c, const int64_t* __restrict__ targets,
                             const float* __restrict__ lse, const float* __restrict__ grad_scale, int64_t n, int64_t d,
                             int64_t v, float softcap, TileUnits units, const int* __restrict__ order, float eps,
                             float* __restrict__ de_acc, float* __restrict__ dc_acc,
                             unsigned long long* __restrict__ kept_tiles) {
  using Products = typename BackwardProductsFor<T>::type;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  RowGradientInputs<Tile> rows(shared_bytes + BackwardShared<Tile, T>::kWork);
  const Unit unit = units.at(blockIdx.x);
  const int64_t row0 = unit.token_block * Tile::kBM, col0 = unit.tile_begin * Tile::kBN;
  if (!rows.load(lse, grad_scale, targets, row0, n)) return;

  Tile tile;
  tile.template for_each_tile<kAligned>(e, n, row0, c, v, order, unit.tile_begin, unit.tile_end, d, shared_bytes,
                                        [](int64_t) {});
  Products products(shared_bytes);
  // EXERCISE(the filter): store S over the sorted order; skip the tile if every |u| < eps
  CCE_EXERCISE_MISSING("07_filter_sort", "the filter");
  // END EXERCISE
  if (threadIdx.x == 0) atomicAdd(kept_tiles, 1ull);
  products.template run<kAligned>(e, c, n, v, d, row0, col0, order, de_acc, dc_acc);
}

__global__ void iota_kernel(int* __restrict__ x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = static_cast<int>(i);
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
  std::vector<MemoryItem> items = s05::forward_scratch(p);
  const size_t v = static_cast<size_t>(p.v);
  if (!no_sort_) items.push_back({"column sums of logits [V]", v * 4});
  if (!backward) return items;
  if (!no_sort_) {
    items.push_back({"sorted sums [V]", v * 4});
    items.push_back({"vocabulary order [V] + identity [V]", v * 8});
    items.push_back({"sort scratch", radix_sort_pairs_temp_bytes<float>(p.v, true)});
  }
  items.push_back({"kept-tile counter", sizeof(unsigned long long)});
  return concat(items, s06::backward_scratch(p));
}

void FilterSortStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  last_problem_ = p;
  scratch_.allocate(workspace(p, false));
  if (no_sort_) {
    s05::forward(in, scratch_, loss, lse, stream);
    return;
  }
  const s03::FusedPlan plan = s05::plan_locked(p);
  float* sums = scratch_.get<float>("column sums of logits [V]");
  CCE_CUDA_CHECK(cudaMemsetAsync(sums, 0, p.v * sizeof(float), stream));
  s05::prepare_locked_lse(p, plan, scratch_, lse, stream);
  SortKeyParams params{{p.n, p.v, p.softcap, lse, scratch_.get<int>("locks")}, sums};
  launch_tile_units<SortKeyEpilogue>(in, plan.path, plan.units, params, stream);
  s05::finish_forward(in, scratch_, loss, lse, stream);
}

void FilterSortStage::sort_vocabulary(const Problem& p, cudaStream_t stream) {
  size_t temp = radix_sort_pairs_temp_bytes<float>(p.v, true);
  int* identity = scratch_.get<int>("vocabulary order [V] + identity [V]") + p.v;
  constexpr int kThreads = 256;
  iota_kernel<<<static_cast<unsigned>((p.v + kThreads - 1) / kThreads), kThreads, 0, stream>>>(identity, p.v);
  CCE_CHECK_LAUNCH();
  // Descending Σ_i z_ij is descending average logit (same N for every entry).
  CCE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      scratch_.get<void>("sort scratch"), temp, scratch_.get<float>("column sums of logits [V]"),
      scratch_.get<float>("sorted sums [V]"), identity, scratch_.get<int>("vocabulary order [V] + identity [V]"),
      static_cast<int>(p.v), 0, 32, stream));
}

void FilterSortStage::backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                               cudaStream_t stream) {
  const Problem& p = in.problem;
  if (!no_sort_ && !scratch_.has("column sums of logits [V]")) throw InputError("stage 07: backward() before forward()");
  scratch_.allocate(workspace(p, true));
  const int* order = nullptr;
  if (!no_sort_) {
    sort_vocabulary(p, stream);
    order = scratch_.get<int>("vocabulary order [V] + identity [V]");
  }
  plan_ = s06::plan_backward(p);
  auto* kept = scratch_.get<unsigned long long>("kept-tile counter");
  CCE_CUDA_CHECK(cudaMemsetAsync(kept, 0, sizeof(unsigned long long), stream));
  const s06::Accumulators acc = s06::prepare_backward(in, upstream, scratch_, de, dc, stream);
  const float eps = filter_eps(p.dtype);
  dispatch_block_path(plan_.path, [&](auto tile, auto element, auto aligned) {
    using Tile = decltype(tile);
    using T = decltype(element);
    launch_tile_backward<Tile, T>(filtered_backward_kernel<Tile, T, decltype(aligned)::value>, plan_.units, stream,
                                  reinterpret_cast<const T*>(in.e.get()), reinterpret_cast<const T*>(in.c.get()),
                                  in.targets.get(), lse, acc.grad_scale, p.n, p.d, p.v, p.softcap, plan_.units, order,
                                  eps, acc.de, acc.dc, kept);
  });
  s06::finish_backward(in, acc, de, dc, stream);
}

FilterStats FilterSortStage::stats() const {
  FilterStats s;
  s.tiles = plan_.units.count();
  if (s.tiles > 0 && scratch_.has("kept-tile counter")) {
    unsigned long long kept = 0;
    copy_to_host(&kept, scratch_.get<unsigned long long>("kept-tile counter"), sizeof kept);
    s.kept_tiles = static_cast<int64_t>(kept);
  }
  return s;
}

std::vector<std::string> FilterSortStage::report_lines() const {
  std::vector<std::string> lines;
  if (last_problem_.n > 0) lines = s06::report_backward_plan(last_problem_);
  const FilterStats s = stats();
  char buf[200];
  const float eps = filter_eps(last_problem_.dtype);
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

std::unique_ptr<Stage> make_stage() { return std::make_unique<FilterSortStage>(); }

}  // namespace cce::s07
