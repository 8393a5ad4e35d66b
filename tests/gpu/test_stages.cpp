// GPU tests: every stage of the stage table against the double-precision CPU
// reference, on odd shapes, both dtypes, every reduction, ignore_index,
// softcap and extreme logits, with outputs poisoned (NaN) before each run; the
// tracked peak memory against each stage's memory model; and every later stage
// against stage 01 at the Gemma-2 shape. Skipped, with the reason, when no CUDA
// device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/driver.h"
#include "common/runner.h"
#include "tests/gpu/skip_without_gpu.h"
#include "common/stage_table.h"

namespace cce {
namespace {

struct Case {
  std::string name;
  int64_t n, d, v;
  Dtype dtype;
  Reduction reduction;
  DataMode data;
  double ignore_fraction = 0.0;
  float softcap = 0.0f;
  bool backward = false;
  double logit_scale = 1.0;  // > 1: multiplies every other row of E, for logits of ~±1e4
};

std::vector<Case> reference_cases() {
  using D = Dtype;
  using R = Reduction;
  using M = DataMode;
  std::vector<Case> cases = {
      {"odd_fp32_mean", 77, 100, 1129, D::kFloat32, R::kMean, M::kRandom},
      {"odd_bf16_mean", 77, 100, 1129, D::kBFloat16, R::kMean, M::kRealistic},
      {"odd_bf16_sum_ignore", 77, 100, 1129, D::kBFloat16, R::kSum, M::kRealistic, 0.3},
      {"odd_fp32_none_softcap", 77, 100, 1129, D::kFloat32, R::kNone, M::kRandom, 0.1, 5.0f},
      {"odd_bf16_none_softcap_ignore", 77, 100, 1129, D::kBFloat16, R::kNone, M::kRealistic, 0.2, 30.0f},
      {"all_ignored_mean", 33, 64, 515, D::kBFloat16, R::kMean, M::kRandom, 1.0},
      {"tiny_v_fp32", 5, 3, 7, D::kFloat32, R::kMean, M::kRandom},
      {"gpt2_v_bf16_mean", 300, 256, 50257, D::kBFloat16, R::kMean, M::kRealistic, 0.05},
      {"gpt2_v_fp32_sum_softcap", 300, 256, 50257, D::kFloat32, R::kSum, M::kRealistic, 0.0, 30.0f},
      // One token block, hundreds of vocabulary blocks: the lock of stage 05 under contention.
      {"contention_small_n_large_v", 40, 128, 65613, D::kBFloat16, R::kMean, M::kRealistic},
      {"extreme_logits_fp32", 64, 96, 2053, D::kFloat32, R::kMean, M::kRandom, 0.0, 0.0f, false, 1e4},
      {"extreme_logits_bf16_softcap", 64, 96, 2053, D::kBFloat16, R::kNone, M::kRandom, 0.0, 30.0f, false, 1e4},
      // More tokens than the one-block reductions have threads (1024): every warp of them holds a share.
      {"many_tokens_fp32_mean_ignore", 3001, 64, 515, D::kFloat32, R::kMean, M::kRandom, 0.1},
  };
  std::vector<Case> out;
  for (const Case& c : cases) {
    out.push_back(c);
    Case b = c;
    b.name += "_backward";
    b.backward = true;
    out.push_back(b);
  }
  return out;
}

struct Param {
  int stage_index;
  Case c;
};

// Shown by ctest instead of a byte dump of the parameter.
void PrintTo(const Param& p, std::ostream* os) { *os << all_stages()[p.stage_index]()->name() << "/" << p.c.name; }

std::vector<Param> params() {
  std::vector<Param> out;
  const auto& stages = all_stages();
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    const bool has_backward = stages[s]()->has_backward();
    for (const Case& c : reference_cases())
      if (!c.backward || has_backward) out.push_back({s, c});
  }
  return out;
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return "stage" + all_stages()[info.param.stage_index]()->name() + "_" + info.param.c.name;
}

HostInputs make_inputs(const Problem& p, const Case& c, uint64_t seed) {
  GeneratorOptions gen;
  gen.mode = c.data;
  gen.seed = seed;
  gen.ignore_fraction = c.ignore_fraction;
  HostInputs in = generate_inputs(p, gen);
  if (c.logit_scale != 1.0) {
    // Logits of ~±1e4 in every other row: a naive exp overflows there.
    for (int64_t i = 0; i < p.n; i += 2)
      for (int64_t k = 0; k < p.d; ++k) in.e[i * p.d + k] *= static_cast<float>(c.logit_scale);
    if (p.dtype == Dtype::kBFloat16) round_to_bf16(in.e);
  }
  return in;
}

Problem make_problem(const Case& c) {
  Problem p;
  p.n = c.n;
  p.d = c.d;
  p.v = c.v;
  p.dtype = c.dtype;
  p.reduction = c.reduction;
  p.softcap = c.softcap;
  return p;
}

// One stage's outputs as the "want" side of a comparison with another run's.
std::vector<double> as_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// One run with the outputs poisoned (NaN) first, downloaded.
HostOutputs run_once(StageRunner& runner, bool backward) {
  runner.poison_outputs();
  if (backward)
    runner.forward_backward();
  else
    runner.forward();
  return runner.download();
}

class StageVsReference : public testing::TestWithParam<Param> {};

TEST_P(StageVsReference, MatchesReferenceWithPoisonedOutputs) {
  SKIP_WITHOUT_GPU();
  const Param& param = GetParam();
  const Case& c = param.c;
  auto stage = all_stages()[param.stage_index]();
  Problem p = make_problem(c);
  HostInputs in = make_inputs(p, c, 1000 + param.stage_index);
  std::vector<float> upstream = default_upstream(p, 7);
  StageRunner runner(*stage, p, in, upstream);
  HostOutputs out = run_once(runner, c.backward);
  // Full comparison: these shapes stay under the sampling threshold.
  CheckReport report =
      check_outputs(p, in, out, upstream, c.backward, int64_t{1} << 26, 8, stage->gradient_approximation());
  EXPECT_EQ(report.note, "full check: every output element");
  for (const auto& cmp : report.comparisons) {
    EXPECT_TRUE(cmp.passed()) << stage->name() << " " << c.name << ": " << cmp.summary()
                              << (cmp.first_mismatches.empty() ? "" : "\n  " + cmp.first_mismatches[0]);
  }
  EXPECT_TRUE(report.passed());

  // The memory model is exact: what the tracker saw beyond the inputs.
  auto model = runner.memory_model(c.backward);
  EXPECT_EQ(runner.peak_beyond_inputs(), total_bytes(model)) << stage->name() << " " << c.name;
}

// Run twice on the same inputs: atomic- and lock-based stages are not bitwise
// deterministic, but each run is within the arithmetic's bound of the
// reference, so the two differ by at most twice it; a stage that says it is
// deterministic (stages 08 to 10) must give the same bits from two fresh
// stage objects. A stage object's second run is within twice the bound of
// its first: a stage may plan it from the first (stage 10's dense plan
// before the forward), so its bits may differ.
TEST_P(StageVsReference, RunTwiceAgrees) {
  SKIP_WITHOUT_GPU();
  const Param& param = GetParam();
  const Case& c = param.c;
  auto stage = all_stages()[param.stage_index]();
  auto fresh = all_stages()[param.stage_index]();
  Problem p = make_problem(c);
  HostInputs in = make_inputs(p, c, 2000 + param.stage_index);
  const std::vector<float> upstream = default_upstream(p, 9);
  StageRunner runner(*stage, p, in, upstream);
  StageRunner fresh_runner(*fresh, p, in, upstream);
  const HostOutputs a = run_once(runner, c.backward), b = run_once(fresh_runner, c.backward);
  const HostOutputs second = run_once(runner, c.backward);
  ReferenceOptions opt;
  opt.backward = c.backward;
  opt.upstream = upstream;
  opt.bounds = true;
  opt.approximation = stage->gradient_approximation();
  const ReferenceResult ref = reference_cross_entropy(p, in, opt);
  auto twice = [](std::vector<double> bound) {
    for (double& x : bound) x *= 2.0;
    return bound;
  };
  auto expect_within_twice_the_bound = [&](const HostOutputs& x, const HostOutputs& y, const char* which) {
    std::vector<Comparison> cmps = {compare("lse", x.lse, as_double(y.lse), twice(ref.lse_bound), 0.0)};
    if (p.reduction == Reduction::kNone)
      cmps.push_back(compare("loss", x.loss, as_double(y.loss), twice(ref.loss_per_token_bound), 0.0));
    else
      cmps.push_back(compare("loss", x.loss, as_double(y.loss), Tolerance{2.0 * ref.loss_bound, 0.0}));
    if (c.backward) {
      cmps.push_back(compare("dE", x.de, as_double(y.de), twice(ref.de_bound), 2.0 * ref.output_rtol, p.d));
      cmps.push_back(compare("dC", x.dc, as_double(y.dc), twice(ref.dc_bound), 2.0 * ref.output_rtol, p.d));
    }
    for (const auto& cmp : cmps)
      EXPECT_TRUE(cmp.passed()) << stage->name() << " " << c.name << ", " << which << ": " << cmp.summary();
  };
  expect_within_twice_the_bound(a, second, "a stage object's first and second runs");
  if (!stage->bitwise_reproducible(c.backward)) {
    expect_within_twice_the_bound(a, b, "two stage objects' runs");
    return;
  }
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_TRUE(a.de == b.de) << "dE differs between two runs";
  EXPECT_TRUE(a.dc == b.dc) << "dC differs between two runs";
}

// The executables' --check decides their exit code: stage 01 as it is exits
// 0, and the same stage with one LSE value overwritten after its forward
// exits 1 (kExitCheckFailed).
class LseOverwritten : public Stage {
 public:
  std::string name() const override { return inner_->name(); }
  std::string summary() const override { return inner_->summary(); }
  bool has_backward() const override { return inner_->has_backward(); }
  std::vector<MemoryItem> workspace(const Problem& p, bool backward) const override {
    return inner_->workspace(p, backward);
  }
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override {
    inner_->forward(in, loss, lse, stream);
    CCE_CUDA_CHECK(cudaMemsetAsync(lse, 0, sizeof(float), stream));  // LSE_0 = 0
  }
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override {
    inner_->backward(in, lse, upstream, de, dc, stream);
  }
  void release_workspace() override { inner_->release_workspace(); }

 private:
  std::unique_ptr<Stage> inner_ = all_stages()[0]();
};
std::unique_ptr<Stage> make_lse_overwritten() { return std::make_unique<LseOverwritten>(); }

TEST(Driver, AFailedCheckExitsWithOne) {
  SKIP_WITHOUT_GPU();
  std::vector<const char*> args = {"stage", "--check", "--n", "77", "--d", "100", "--v", "1129", "--iters", "0"};
  char** argv = const_cast<char**>(args.data());
  EXPECT_EQ(run_stage_main(all_stages()[0], static_cast<int>(args.size()), argv), kExitOk);
  EXPECT_EQ(run_stage_main(&make_lse_overwritten, static_cast<int>(args.size()), argv), kExitCheckFailed);
}

// The check has the power to reject a stage: every stage's mean-reduced
// outputs, checked as if the problem asked for the sum, fail (loss, and the
// gradients, which are N_valid times too small).
TEST(StageChecks, EveryStageFailsAgainstTheOtherReduction) {
  SKIP_WITHOUT_GPU();
  Case c = {"odd_bf16_mean", 77, 100, 1129, Dtype::kBFloat16, Reduction::kMean, DataMode::kRealistic, 0.1};
  for (const auto& factory : all_stages()) {
    auto stage = factory();
    c.backward = stage->has_backward();
    const Problem p = make_problem(c);
    const HostInputs in = make_inputs(p, c, 3000);
    const std::vector<float> upstream = default_upstream(p, 7);
    StageRunner runner(*stage, p, in, upstream);
    const HostOutputs out = run_once(runner, c.backward);
    const GradientApproximation approximation = stage->gradient_approximation();
    EXPECT_TRUE(check_outputs(p, in, out, upstream, c.backward, int64_t{1} << 26, 8, approximation).passed())
        << stage->name() << " fails its own problem";
    Problem sum = p;
    sum.reduction = Reduction::kSum;
    const CheckReport wrong = check_outputs(sum, in, out, upstream, c.backward, int64_t{1} << 26, 8, approximation);
    EXPECT_FALSE(wrong.passed()) << stage->name() << " passes a check of the other reduction";
    for (const auto& cmp : wrong.comparisons)
      if (cmp.name != "lse") {
        EXPECT_FALSE(cmp.passed()) << stage->name() << ": " << cmp.summary();
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllStages, StageVsReference, testing::ValuesIn(params()), param_name);

// Every later stage against stage 01 at the Gemma-2 shape (D=2304, V=256000),
// N=4096 for the forward and N=2048 for the backward, bf16, realistic data.
struct LaterParam {
  int stage_index;
  bool backward;
};
void PrintTo(const LaterParam& p, std::ostream* os) {
  *os << all_stages()[p.stage_index]()->name() << (p.backward ? "/backward" : "/forward");
}

class StageVsStage01 : public testing::TestWithParam<LaterParam> {};

TEST_P(StageVsStage01, GemmaShape) {
  SKIP_WITHOUT_GPU();
  const auto [stage_index, backward] = GetParam();  // NOLINT
  auto stage = all_stages()[stage_index]();
  auto baseline = all_stages()[0]();
  Problem p;
  p.n = backward ? 2048 : 4096;
  p.d = 2304;
  p.v = 256000;
  p.dtype = Dtype::kBFloat16;
  GeneratorOptions gen;
  HostInputs in = generate_inputs(p, gen);
  std::vector<float> upstream = default_upstream(p, 1);
  auto run = [&](Stage& s) {
    StageRunner runner(s, p, in, upstream);
    return run_once(runner, backward);
  };
  HostOutputs want = run(*baseline);
  HostOutputs got = run(*stage);
  std::vector<Comparison> cmps = {compare("loss", got.loss, as_double(want.loss), {1e-3, 1e-3}),
                                  compare("lse", got.lse, as_double(want.lse), {2e-3, 1e-3})};
  if (backward) {
    auto de_ref = as_double(want.de), dc_ref = as_double(want.dc);
    // Two bf16 results, both within their bound of the truth, but no double
    // reference at this size: a consistency check, 2^-7 of the largest
    // element (twice one bf16 rounding of it) plus 2^-7 relative; a stage that
    // leaves out terms (07, 08) may differ by 4 times that.
    auto tolerance = [&](const std::vector<double>& ref) {
      const double scale = stage->gradient_approximation().eps > 0.0 ? 4.0 : 1.0;
      return Tolerance{scale * 0x1p-7 * max_abs(ref), scale * 0x1p-7};
    };
    cmps.push_back(compare("dE", got.de, de_ref, tolerance(de_ref), p.d));
    cmps.push_back(compare("dC", got.dc, dc_ref, tolerance(dc_ref), p.d));
  }
  for (const auto& c : cmps) EXPECT_TRUE(c.passed()) << stage->name() << ": " << c.summary();
}

std::vector<LaterParam> later_stages() {
  std::vector<LaterParam> out;
  const auto& stages = all_stages();
  for (int s = 1; s < static_cast<int>(stages.size()); ++s) {
    out.push_back({s, false});
    if (stages[s]()->has_backward()) out.push_back({s, true});
  }
  return out;
}

std::string later_name(const testing::TestParamInfo<LaterParam>& info) {
  return "stage" + all_stages()[info.param.stage_index]()->name() + (info.param.backward ? "_backward" : "_forward");
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StageVsStage01);
INSTANTIATE_TEST_SUITE_P(LaterStages, StageVsStage01, testing::ValuesIn(later_stages()), later_name);

}  // namespace
}  // namespace cce
