// The tile engine as a plain GEMM: an epilogue that writes every tile out,
// run on every tile product (path) against cuBLAS (stage 01's gemm_logits,
// fp32 accumulation, fp32 output), on aligned and odd shapes: N and V not
// multiples of any tile, D not a multiple of 64 (a partial last k-slice) and
// not a multiple of 8 (element loads), and schedules with several units per
// block and several tiles per unit (the persistent loop, the pipeline's
// barrier phases wrapping around). Outputs are poisoned (NaN) first, so an
// unwritten element fails. A path the GPU or the build cannot run is
// skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/host_data.h"
#include "common/stage.h"
#include "common/tile/launch.cuh"
#include "stages/01_materialized/materialized.h"
#include "tests/gpu/skip_without_gpu.h"

namespace cce {
namespace {

struct WriteTileParams {
  float* out;  // [N,V] fp32
  int64_t n, v;
};

template <class Frag>
struct WriteTileEpilogue {
  using Params = WriteTileParams;
  static constexpr size_t kSharedBytes = 0;
  Params p;
  __device__ WriteTileEpilogue(const Params& params, unsigned char*) : p(params) {}
  __device__ void begin(const Unit&) {}
  __device__ void tile(Frag& frag, const Unit& unit, int64_t col0) {
    const int64_t row0 = unit.token_block * Frag::kBM;
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r)
#pragma unroll
      for (int c = 0; c < Frag::kCols; ++c) {
        const int64_t row = row0 + Frag::row_of(r), col = col0 + Frag::col_of(c);
        if (row < p.n && col < p.v) p.out[row * p.v + col] = frag.z(r, c);
      }
  }
  __device__ void end(const Unit&) {}
};

struct GemmCase {
  std::string name;
  int64_t n, d, v;
  int64_t ranges = 0, grid = 0;  // 0: the planner's; else forced
};

struct GemmParam {
  TilePath path;
  GemmCase shape;
};

std::string path_name(TilePath path) {
  switch (path) {
    case TilePath::kFp32: return "fp32";
    case TilePath::kMmaSync: return "mma_sync";
    case TilePath::kMmaSyncUnaligned: return "mma_sync_unaligned";
    case TilePath::kMmaSyncForward: return "mma_sync_forward";
    case TilePath::kWgmma: return "wgmma";
    case TilePath::kWgmmaPipeline: return "pipeline";
  }
  return "?";
}

void PrintTo(const GemmParam& p, std::ostream* os) { *os << path_name(p.path) << "/" << p.shape.name; }

// Why a path cannot run this shape on this GPU and build ("" when it can),
// from the hardware and the build alone: asking the path chooser
// (choose_forward_path) would let a wrong choice skip the very paths it should
// have chosen, and the test would pass without running them.
std::string cannot_run(TilePath path, const Problem& p) {
  if (path == TilePath::kFp32) return "";
  if (path == TilePath::kMmaSyncUnaligned) return "";
  if (p.d % 8 != 0) return "D % 8 != 0: 16-byte loads impossible, only element loads run";
  if (path != TilePath::kWgmma && path != TilePath::kWgmmaPipeline) return "";  // mma.sync: any sm_80+
#ifdef CCE_HAVE_WGMMA
  cudaDeviceProp prop{};
  CCE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0)
    return "wgmma needs compute capability 9.0 exactly (sm_90a); " + std::string(prop.name) + " has " +
           std::to_string(prop.major) + "." + std::to_string(prop.minor);
  const size_t pipeline_shared = WgmmaPipeline::shared_bytes(WriteTileEpilogue<WgmmaPipelineFragment>::kSharedBytes);
  if (path == TilePath::kWgmmaPipeline && prop.sharedMemPerBlockOptin < pipeline_shared)
    return "the wgmma pipeline needs " + std::to_string(pipeline_shared) + " bytes of shared memory per block, " +
           prop.name + " offers " + std::to_string(prop.sharedMemPerBlockOptin);
  return "";
#else
  return "built without sm_90a (CMAKE_CUDA_ARCHITECTURES has no 90): no wgmma paths in this build";
#endif
}

class TileEngineGemm : public testing::TestWithParam<GemmParam> {};

TEST_P(TileEngineGemm, EveryTileMatchesCublas) {
  const GemmParam& param = GetParam();
  Problem p;
  p.n = param.shape.n;
  p.d = param.shape.d;
  p.v = param.shape.v;
  p.dtype = param.path == TilePath::kFp32 ? Dtype::kFloat32 : Dtype::kBFloat16;
  SKIP_WITHOUT_GPU();
  const std::string why = cannot_run(param.path, p);
  if (!why.empty()) GTEST_SKIP() << why;

  GeneratorOptions gen;
  gen.mode = DataMode::kRandom;
  gen.seed = 4242 + static_cast<uint64_t>(p.n * 7 + p.d * 3 + p.v);
  const HostInputs host = generate_inputs(p, gen);
  const DeviceInputs in = DeviceInputs::upload(p, host);
  const size_t count = static_cast<size_t>(p.n * p.v);
  DeviceBuffer<float> got(count), want(count);
  poison_device(got.get(), got.bytes());
  s01::gemm_logits(in, want.get(), nullptr);

  UnitPolicy policy;
  policy.ranges = param.shape.ranges;
  TileUnits units = plan_tile_units(p, param.path, policy);
  if (param.shape.grid > 0) units.grid = std::min(units.grid, param.shape.grid);
  launch_tile_units<WriteTileEpilogue>(in, param.path, units, WriteTileParams{got.get(), p.n, p.v}, nullptr);
  CCE_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<float> a(count), b(count);
  copy_to_host(a.data(), got.get(), got.bytes());
  copy_to_host(b.data(), want.get(), want.bytes());
  double scale = 0;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  // Same inputs, both accumulate in fp32: only the order of the sums differs.
  const double atol = 1e-5 * scale, rtol = 1e-4;
  double max_abs = 0, max_rel = 0;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(diff <= atol + rtol * std::fabs(b[i]))) {
      if (bad++ == 0) first_bad = i;
    }
    if (!std::isnan(diff)) {
      max_abs = std::max(max_abs, diff);
      max_rel = std::max(max_rel, diff / std::max(std::fabs(static_cast<double>(b[i])), 1e-30));
    }
  }
  std::printf("%s on %s: %lld units of %lld tiles on %lld blocks; max abs err %.3g, max rel err %.3g\n",
              to_string(param.path), p.describe().c_str(), static_cast<long long>(units.count()),
              static_cast<long long>(units.tiles_per_range), static_cast<long long>(units.grid), max_abs, max_rel);
  EXPECT_EQ(bad, 0u) << bad << " of " << count << " elements off; first [" << first_bad / p.v << ","
                     << first_bad % p.v << "]: " << a[first_bad] << " vs cuBLAS " << b[first_bad];
}

std::vector<GemmParam> gemm_params() {
  const std::vector<GemmCase> shapes = {
      {"aligned_256x256x1024", 256, 256, 1024},
      {"odd_77x104x1129", 77, 104, 1129},          // D % 64 != 0: a partial last k-slice
      {"odd_77x100x1129", 77, 100, 1129},          // D % 8 != 0: element loads only
      {"many_units_300x200x5000", 300, 200, 5000, 4, 7},  // several units per block, several tiles per unit
      {"deep_units_300x520x5000", 300, 520, 5000, 4, 7},  // the same with more k-slices than the ring has stages
      {"wide_130x768x50257", 130, 768, 50257},
  };
  const TilePath paths[] = {TilePath::kFp32,  TilePath::kMmaSync, TilePath::kMmaSyncUnaligned, TilePath::kMmaSyncForward,
                            TilePath::kWgmma, TilePath::kWgmmaPipeline};
  std::vector<GemmParam> out;
  for (TilePath path : paths)
    for (const GemmCase& shape : shapes) out.push_back({path, shape});
  return out;
}

std::string gemm_name(const testing::TestParamInfo<GemmParam>& info) {
  return path_name(info.param.path) + "_" + info.param.shape.name;
}

INSTANTIATE_TEST_SUITE_P(AllPaths, TileEngineGemm, testing::ValuesIn(gemm_params()), gemm_name);

// The pipeline gathering C's rows while it multiplies (row_gather.cuh): C's
// rows in a random order from `first` into a poisoned buffer, which the C map
// reads, and each 128-row tile's mean. The gathered rows must be C's, bit for
// bit; the means must be the host's (float sums in row order, bf16 ties to
// even), bit for bit; and the logits must be cuBLAS's over the sorted rows, so
// that a tile loaded before its rows arrived (the poison: NaN) fails.
struct GatherCase {
  std::string name;
  int64_t n, d, v, first, rows;
  int64_t ranges = 0, grid = 0;  // 0: the planner's; else forced
};

class TileEngineGather : public testing::TestWithParam<GatherCase> {};

TEST_P(TileEngineGather, RowsMeansAndLogitsOfTheOrder) {
  const GatherCase& g = GetParam();
  Problem full;
  full.n = g.n, full.d = g.d, full.v = g.v, full.dtype = Dtype::kBFloat16;
  Problem chunk = full;
  chunk.v = g.rows;
  SKIP_WITHOUT_GPU();
  const std::string why = cannot_run(TilePath::kWgmmaPipeline, chunk);
  if (!why.empty()) GTEST_SKIP() << why;

  GeneratorOptions gen;
  gen.mode = DataMode::kRandom;
  gen.seed = 777 + static_cast<uint64_t>(g.v);
  const HostInputs host = generate_inputs(full, gen);
  const DeviceInputs in = DeviceInputs::upload(full, host);
  std::vector<int> order(static_cast<size_t>(g.v));
  for (int64_t j = 0; j < g.v; ++j) order[j] = static_cast<int>(j);
  std::mt19937 rng(static_cast<uint32_t>(g.v));
  std::shuffle(order.begin(), order.end(), rng);
  DeviceBuffer<int> order_d(order.size());
  copy_to_device(order_d.get(), order.data(), order_d.bytes());

  const int64_t mean_tiles = (g.v + RowGather::kMeanRows - 1) / RowGather::kMeanRows;
  DeviceBuffer<uint16_t> sorted(static_cast<size_t>(g.rows * g.d)), means(static_cast<size_t>(mean_tiles * g.d));
  poison_device(sorted.get(), sorted.bytes());
  poison_device(means.get(), means.bytes());
  DeviceBuffer<unsigned> counts(RowGather::flag_bytes(g.rows) / 4);
  CCE_CUDA_CHECK(cudaMemset(counts.get(), 0, counts.bytes()));
  const RowGather gather{reinterpret_cast<const __nv_bfloat16*>(in.c.get()), order_d.get(), g.first, g.rows, g.d,
                         reinterpret_cast<__nv_bfloat16*>(sorted.get()), reinterpret_cast<__nv_bfloat16*>(means.get()),
                         counts.get()};
  const size_t count = static_cast<size_t>(g.n * g.rows);
  DeviceBuffer<float> got(count), want(count);
  poison_device(got.get(), got.bytes());
  UnitPolicy policy;
  policy.ranges = g.ranges;
  TileUnits units = plan_tile_units(chunk, TilePath::kWgmmaPipeline, policy);
  if (g.grid > 0) units.grid = std::min(units.grid, g.grid);
  launch_tile_units<WriteTileEpilogue>(chunk, in.e.get(), sorted.get(), TilePath::kWgmmaPipeline, units,
                                       WriteTileParams{got.get(), g.n, g.rows}, nullptr, gather);
  CCE_CUDA_CHECK(cudaDeviceSynchronize());

  // The rows and the means, bit for bit.
  std::vector<uint16_t> rows_got(sorted.bytes() / 2), means_got(means.bytes() / 2);
  copy_to_host(rows_got.data(), sorted.get(), sorted.bytes());
  copy_to_host(means_got.data(), means.get(), means.bytes());
  size_t bad_rows = 0, bad_means = 0;
  for (int64_t r = 0; r < g.rows; ++r)
    for (int64_t k = 0; k < g.d; ++k)
      bad_rows += rows_got[r * g.d + k] != float_to_bf16_bits(host.c[order[g.first + r] * g.d + k]);
  for (int64_t r0 = 0; r0 < g.rows; r0 += RowGather::kMeanRows) {
    const int64_t rows = std::min<int64_t>(RowGather::kMeanRows, g.rows - r0);
    for (int64_t k = 0; k < g.d; ++k) {
      float sum = 0.0f;
      for (int64_t r = 0; r < rows; ++r)  // the value the device holds: C rounded to bf16
        sum += bf16_bits_to_float(float_to_bf16_bits(host.c[order[g.first + r0 + r] * g.d + k]));
      bad_means += means_got[((g.first + r0) / RowGather::kMeanRows) * g.d + k] !=
                   float_to_bf16_bits(sum / static_cast<float>(rows));
    }
  }
  EXPECT_EQ(bad_rows, 0u) << "of " << g.rows * g.d << " gathered values";
  EXPECT_EQ(bad_means, 0u) << "of the means' values";

  // The logits over the sorted rows, against cuBLAS on the host's sorted C.
  HostInputs sorted_host = host;
  sorted_host.v = g.rows;
  sorted_host.c.assign(static_cast<size_t>(g.rows * g.d), 0.0f);
  for (int64_t r = 0; r < g.rows; ++r)
    std::copy_n(host.c.begin() + order[g.first + r] * g.d, g.d, sorted_host.c.begin() + r * g.d);
  sorted_host.targets.assign(static_cast<size_t>(g.n), 0);
  s01::gemm_logits(DeviceInputs::upload(chunk, sorted_host), want.get(), nullptr);
  std::vector<float> a(count), b(count);
  copy_to_host(a.data(), got.get(), got.bytes());
  copy_to_host(b.data(), want.get(), want.bytes());
  double scale = 0;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i)
    bad += !(std::fabs(static_cast<double>(a[i]) - b[i]) <= 1e-5 * scale + 1e-4 * std::fabs(b[i]));
  std::printf("gather of %lld rows from %lld on %s: %lld units on %lld blocks\n", static_cast<long long>(g.rows),
              static_cast<long long>(g.first), chunk.describe().c_str(), static_cast<long long>(units.count()),
              static_cast<long long>(units.grid));
  EXPECT_EQ(bad, 0u) << bad << " of " << count << " logits off";
}

INSTANTIATE_TEST_SUITE_P(
    Pipeline, TileEngineGather,
    testing::Values(GatherCase{"whole_256x256x1024", 256, 256, 1024, 0, 1024},
                    // one token block: the single-block kernel; D = 264: a second, partial segment of columns
                    GatherCase{"single_block_100x264x3001", 100, 264, 3001, 0, 3001},
                    // clusters of two with a ghost, several units per block and tiles per unit
                    GatherCase{"many_units_300x200x5000", 300, 200, 5000, 0, 5000, 4, 7},
                    // a chunk from sorted position 512, its last mean tile partial
                    GatherCase{"chunk_300x136x5000", 300, 136, 5000, 512, 2001}),
    [](const testing::TestParamInfo<GatherCase>& info) { return info.param.name; });

// The block-level wgmma tiles address a thread's rows in 32-bit counts of 16-byte chunks (tile_wgmma.cuh): a problem
// whose rows · D / 8 reaches 2^32 must not get them, one just below must get the path a small problem gets.
TEST(TilePaths, BlockLevelWgmmaOnlyWhereItsChunkOffsetsFit) {
  SKIP_WITHOUT_GPU();
  Problem small;
  small.n = 77, small.d = 128, small.v = 1129;
  Problem below = small, past = small;
  below.d = past.d = 8192;
  below.v = (int64_t{1} << 32) / (8192 / 8) - 1;  // 4194303 rows of 1024 chunks
  past.v = below.v + 1;
  EXPECT_EQ(choose_block_path(below), choose_block_path(small));
  const TilePath path = choose_block_path(past);
  EXPECT_NE(path, TilePath::kWgmma) << to_string(path);
  EXPECT_NE(path, TilePath::kWgmmaPipeline) << to_string(path);
}

}  // namespace
}  // namespace cce
