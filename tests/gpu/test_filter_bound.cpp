// Stage 07's filtering changes the gradient by at most what eps allows.
//
// A skipped tile holds only entries with |u_ij| < eps, where
// u_ij = (p_ij − [j = t_i])·softcap'(z_ij) and S_ij = g_i·u_ij. Dropping them
// changes
//   dE_ik = Σ_j S_ij C_jk   by at most  g_i · eps · Σ_j |C_jk|,
//   dC_jk = Σ_i S_ij E_ik   by at most  eps · Σ_i g_i |E_ik|.
// The test runs stage 07 with filtering off and on (same sorted order), checks
// that tiles were skipped, and that every element of dE and dC moved by less
// than that bound plus the bf16 rounding of the two outputs.
#include <gtest/gtest.h>

#include <cmath>

#include "common/runner.h"
#include "tests/gpu/skip_without_gpu.h"
#include "stages/07_filter_sort/filter_sort.h"

namespace cce {
namespace {

HostOutputs run_stage07(const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                        std::vector<const char*> flags, s07::FilterStats* stats) {
  s07::FilterSortStage stage;
  OptionParser parser("stage07");
  stage.add_options(parser);
  flags.insert(flags.begin(), "stage07");
  if (!parser.parse(static_cast<int>(flags.size()), const_cast<char**>(flags.data()))) ADD_FAILURE();
  StageRunner runner(stage, p, in, upstream);
  runner.poison_outputs();
  runner.forward_backward();
  HostOutputs out = runner.download();
  *stats = stage.stats();
  return out;
}

TEST(FilterBound, ErrorWithinEpsBound) {
  SKIP_WITHOUT_GPU();
  Problem p;
  p.n = 300;
  p.d = 128;
  p.v = 16411;
  p.dtype = Dtype::kBFloat16;
  GeneratorOptions gen;  // realistic: most of each row's mass on a few entries
  gen.seed = 77;
  HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 3);
  const float eps = std::ldexp(1.0f, -8);  // coarse, so that the bound is exercised
  s07::FilterStats exact_stats, filtered_stats;
  HostOutputs exact = run_stage07(p, in, upstream, {"--no-filter"}, &exact_stats);
  HostOutputs filtered = run_stage07(p, in, upstream, {"--filter-eps", "0.00390625"}, &filtered_stats);
  EXPECT_EQ(exact_stats.kept_tiles, exact_stats.tiles);
  EXPECT_LT(filtered_stats.kept_tiles, filtered_stats.tiles) << "nothing was filtered: the test would prove nothing";
  EXPECT_GT(filtered_stats.kept_tiles, 0);

  const double g = 1.0 / static_cast<double>(count_valid_targets(p, in.targets));  // mean: every g_i equal
  std::vector<double> c_abs_sum(p.d, 0.0), e_abs_sum(p.d, 0.0);
  for (int64_t j = 0; j < p.v; ++j)
    for (int64_t k = 0; k < p.d; ++k) c_abs_sum[k] += std::fabs(in.c[j * p.d + k]);
  for (int64_t i = 0; i < p.n; ++i)
    for (int64_t k = 0; k < p.d; ++k) e_abs_sum[k] += g * std::fabs(in.e[i * p.d + k]);
  auto check = [&](const std::vector<float>& a, const std::vector<float>& b, const std::vector<double>& bound_by_k,
                   double scale, const char* what) {
    double worst = 0.0;
    for (size_t x = 0; x < a.size(); ++x) {
      const double bound = scale * bound_by_k[x % p.d] + std::ldexp(1.0, -7) * std::max(std::fabs(a[x]), std::fabs(b[x])) + 1e-9;
      const double diff = std::fabs(static_cast<double>(a[x]) - b[x]);
      worst = std::max(worst, diff / bound);
      ASSERT_LE(diff, bound) << what << "[" << x / p.d << "," << x % p.d << "]";
    }
    std::printf("%s: largest change %.3f of its bound\n", what, worst);
  };
  check(filtered.de, exact.de, c_abs_sum, g * eps, "dE");
  check(filtered.dc, exact.dc, e_abs_sum, eps, "dC");
}

}  // namespace
}  // namespace cce
