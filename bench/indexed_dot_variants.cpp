// indexed_dot_variants: stage 04's two layouts of the target term timed
// against each other, alone (without the LSE), with their results compared.
//
//   build/bench/indexed_dot_variants [--n 8192 --d 2304 --v 256000 --dtype bf16 --seed 1234 --iters 20]
//
// Prints, per variant, the median time over --iters runs after 2 warm-ups
// (the 2d variant's zeroing of dot included) and the achieved bandwidth over
// the bytes both must read (row t_i of C and row i of E per valid token), and
// whether the two agree within fp32 rounding (exit 1 if not). Exit 77 without a GPU.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/driver.h"
#include "common/host_data.h"
#include "common/options.h"
#include "common/timer.h"
#include "stages/04_indexed_dot/indexed_dot.h"

namespace {

using namespace cce;

int run(int argc, char** argv) {
  int64_t n = 8192, d = 2304, v = 256000, seed = 1234, iters = 20;
  std::string dtype = "bf16";
  OptionParser parser("indexed_dot_variants");
  add_shape_options(parser, &n, &d, &v);
  parser.add_string("dtype", &dtype, "bf16 or fp32");
  parser.add_int("seed", &seed, "seed of the generated inputs");
  parser.add_int("iters", &iters, "timed runs per variant (median reported)");
  if (!parser.parse(argc, argv)) return kExitOk;
  if (iters < 1) throw InputError("--iters must be >= 1");
  Problem p;
  p.n = n, p.d = d, p.v = v;
  p.dtype = parse_dtype(dtype);
  p.validate();
  std::string why;
  if (probe_gpu(&why) == GpuState::kBroken) {
    std::fprintf(stderr, "indexed_dot_variants: CUDA error: %s\n", why.c_str());
    return 1;
  }
  if (!cuda_device_available(&why)) {
    std::printf("indexed_dot_variants: SKIPPED: no usable CUDA device (%s)\n", why.c_str());
    return kExitSkipped;
  }
  GeneratorOptions gen;
  gen.seed = static_cast<uint64_t>(seed);
  const HostInputs host = generate_inputs(p, gen);
  const DeviceInputs in = DeviceInputs::upload(p, host);
  DeviceBuffer<float> dot(p.n);

  std::vector<float> results[2];
  double ms[2];
  const s04::DotVariant variants[2] = {s04::DotVariant::k2d, s04::DotVariant::k1d};
  for (int k = 0; k < 2; ++k) {
    s04::indexed_dot(in, variants[k], dot.get(), nullptr);
    results[k].resize(p.n);
    copy_to_host(results[k].data(), dot.get(), static_cast<size_t>(p.n) * sizeof(float));
    ms[k] = time_median_ms([&] { s04::indexed_dot(in, variants[k], dot.get(), nullptr); }, static_cast<int>(iters), 2);
  }
  double max_diff = 0, max_dot = 0;
  for (int64_t i = 0; i < p.n; ++i) {
    const double diff = std::fabs(static_cast<double>(results[0][i]) - results[1][i]);
    max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);  // a NaN must not hide
    max_dot = std::max(max_dot, std::fabs(static_cast<double>(results[1][i])));
  }
  const double bytes = 2.0 * static_cast<double>(count_valid_targets(p, host.targets)) * static_cast<double>(p.d) *
                       static_cast<double>(p.element_bytes());
  std::printf("indexed_dot_variants  %s  (realistic data, seed %lld)\n", p.describe().c_str(), static_cast<long long>(seed));
  for (int k = 0; k < 2; ++k) {
    const s04::DotGrid g = s04::plan_indexed_dot(p, variants[k]);
    std::printf("  %s  %.4f ms  %7.1f GB/s  grid %lld x %lld blocks%s\n", s04::to_string(variants[k]), ms[k],
                bytes / (ms[k] * 1e6), static_cast<long long>(g.token_blocks), static_cast<long long>(g.d_slices),
                k == 0 ? "  (zeroing dot included)" : "");
  }
  // The two sum in different orders: expect differences at fp32 rounding level.
  const bool agree = max_diff <= 1e-4 * std::max(1.0, max_dot);
  std::printf("  max |dot_2d - dot_1d| = %.3g (max |dot| %.3g): %s\n", max_diff, max_dot,
              agree ? "agree within rounding" : "DIFFER beyond rounding");
  return agree ? kExitOk : kExitCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return cce::run_program("indexed_dot_variants", [&] { return run(argc, argv); });
}
