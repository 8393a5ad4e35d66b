// The code that decides pass or fail, given answers it must reject.
//
// compare(): one wrong element, a NaN, an Inf, a size that differs, nothing
// to compare, each fails; an element exactly at its bound passes.
// check_outputs(): outputs made from the double reference and rounded as a
// stage writes them (fp32, or bf16 gradients) pass; every corruption below
// fails, on the output it corrupts: an LSE without the last vocabulary
// column, one dE element of the wrong sign, two dE rows swapped, dC all zero,
// dC missing or a row short, a loss of the wrong reduction, a NaN loss. A
// gradient that leaves out the terms below eps passes only when the check is
// told that it does (GradientApproximation), and still fails beyond it; one
// made from logits kept in fp16 passes only as stage 10 keeps them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/reference.h"
#include "common/runner.h"
#include "common/upstream.h"

namespace cce {
namespace {

// ---- compare() -------------------------------------------------------------

TEST(Compare, EqualValuesPass) {
  const Comparison c = compare("x", {1.0f, -2.0f, 0.0f}, {1.0, -2.0, 0.0}, Tolerance{0.0, 0.0});
  EXPECT_TRUE(c.passed()) << c.summary();
  EXPECT_EQ(c.mismatches, 0);
}

TEST(Compare, OneWrongElementFailsAndIsNamed) {
  std::vector<float> got(12, 1.0f);
  std::vector<double> want(12, 1.0);
  got[7] = 1.5f;  // row 1, column 3 of a 2×6... with 4 columns: [1,3]
  const Comparison c = compare("dE", got, want, Tolerance{1e-3, 1e-3}, 4);
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.mismatches, 1);
  ASSERT_EQ(c.first_mismatches.size(), 1u);
  EXPECT_NE(c.first_mismatches[0].find("dE[1,3]"), std::string::npos) << c.first_mismatches[0];
  EXPECT_GT(c.worst_bound_use, 1.0);
}

TEST(Compare, BoundIsInclusiveAndPerElement) {
  // atol[i] + rtol·|ref|: 0.25 + 0.5·1 = 0.75 for the first, 0 + 0.5·2 = 1 for the second.
  const std::vector<double> want = {1.0, 2.0}, atol = {0.25, 0.0};
  EXPECT_TRUE(compare("x", {1.75f, 3.0f}, want, atol, 0.5).passed());
  EXPECT_FALSE(compare("x", {1.8f, 2.0f}, want, atol, 0.5).passed());
  EXPECT_FALSE(compare("x", {1.0f, 3.1f}, want, atol, 0.5).passed());
  const Comparison at_bound = compare("x", {1.75f, 3.0f}, want, atol, 0.5);
  EXPECT_DOUBLE_EQ(at_bound.worst_bound_use, 1.0);
}

TEST(Compare, NanAndInfAreAlwaysMismatches) {
  const double huge = 1e30;
  const Comparison nan = compare("x", {std::numeric_limits<float>::quiet_NaN()}, {0.0}, Tolerance{huge, huge});
  const Comparison inf = compare("x", {std::numeric_limits<float>::infinity()}, {0.0}, Tolerance{huge, huge});
  EXPECT_FALSE(nan.passed());
  EXPECT_FALSE(inf.passed());
  EXPECT_EQ(nan.mismatches, 1);
}

TEST(Compare, SizeMismatchAndEmptyFail) {
  EXPECT_FALSE(compare("x", {1.0f}, {1.0, 1.0}, Tolerance{1.0, 1.0}).passed());
  EXPECT_FALSE(compare("x", {1.0f, 1.0f, 1.0f}, {1.0, 1.0}, Tolerance{1.0, 1.0}).passed());
  EXPECT_FALSE(compare("x", {}, {}, Tolerance{1.0, 1.0}).passed()) << "nothing compared must not pass";
  EXPECT_FALSE(compare("x", {}, {1.0}, Tolerance{1.0, 1.0}).passed());
}

TEST(Compare, BoundsOfTheWrongLengthAreAProgrammingError) {
  EXPECT_THROW(compare("x", {1.0f}, {1.0}, std::vector<double>{}, 0.0), std::invalid_argument);
  EXPECT_THROW(compare("x", {1.0f}, {1.0}, std::vector<double>{0.1, 0.1}, 0.0), std::invalid_argument);
  EXPECT_THROW(compare("x", {1.0f, 1.0f}, {1.0, 1.0}, std::vector<double>{0.1}, 0.0), std::invalid_argument);
}

TEST(CheckReport, NothingComparedFailsAndOneFailureFailsTheReport) {
  CheckReport report;
  EXPECT_FALSE(report.passed()) << "a report that compared nothing must not pass";
  report.comparisons.push_back(compare("a", {1.0f}, {1.0}, Tolerance{0.0, 0.0}));
  EXPECT_TRUE(report.passed());
  report.comparisons.push_back(compare("b", {2.0f}, {1.0}, Tolerance{0.0, 0.0}));
  EXPECT_FALSE(report.passed());
}

// ---- check_outputs() ------------------------------------------------------

Problem odd_problem(Dtype dtype, Reduction reduction, float softcap) {
  Problem p;
  p.n = 77;
  p.d = 100;
  p.v = 1129;
  p.dtype = dtype;
  p.reduction = reduction;
  p.softcap = softcap;
  return p;
}

std::vector<float> as_float(const std::vector<double>& x, bool bf16) {
  std::vector<float> out(x.begin(), x.end());
  if (bf16) round_to_bf16(out);
  return out;
}

// What an exact stage would write: the reference, rounded to the outputs' types.
HostOutputs outputs_from(const Problem& p, const ReferenceResult& ref) {
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  HostOutputs out;
  out.lse = as_float(ref.lse, false);
  out.loss = p.reduction == Reduction::kNone ? as_float(ref.loss_per_token, false) : std::vector<float>{float(ref.loss)};
  out.de = as_float(ref.de, bf16);
  out.dc = as_float(ref.dc, bf16);
  return out;
}

struct Fixture {
  Problem p;
  HostInputs in;
  std::vector<float> upstream;
  ReferenceResult ref;
};

Fixture make_fixture(Dtype dtype, Reduction reduction, float softcap, DataMode data, double ignore_fraction) {
  Fixture f;
  f.p = odd_problem(dtype, reduction, softcap);
  GeneratorOptions gen;
  gen.mode = data;
  gen.seed = 17;
  gen.ignore_fraction = ignore_fraction;
  f.in = generate_inputs(f.p, gen);
  f.upstream = seeded_upstream(f.p, 5);
  ReferenceOptions opt;
  opt.backward = true;
  opt.upstream = f.upstream;
  f.ref = reference_cross_entropy(f.p, f.in, opt);
  return f;
}

// The comparison of one output in a report (a failing test names it).
const Comparison* find(const CheckReport& report, const std::string& name) {
  for (const auto& c : report.comparisons)
    if (c.name == name) return &c;
  return nullptr;
}

CheckReport check(const Fixture& f, const HostOutputs& out, GradientApproximation approximation = {}) {
  return check_outputs(f.p, f.in, out, f.upstream, true, int64_t{1} << 26, 8, approximation);
}

// Only `name` fails: the corruption is caught where it is, not by accident elsewhere.
void expect_only_failure(const CheckReport& report, const std::string& name) {
  EXPECT_FALSE(report.passed());
  for (const auto& c : report.comparisons) EXPECT_EQ(c.passed(), c.name != name) << c.summary();
}

class CheckOutputs : public testing::TestWithParam<int> {
 protected:
  Fixture fixture() const {
    switch (GetParam()) {
      case 0: return make_fixture(Dtype::kFloat32, Reduction::kMean, 0.0f, DataMode::kRandom, 0.0);
      case 1: return make_fixture(Dtype::kBFloat16, Reduction::kNone, 30.0f, DataMode::kRealistic, 0.2);
      default: return make_fixture(Dtype::kBFloat16, Reduction::kSum, 0.0f, DataMode::kRandom, 0.1);
    }
  }
};

// Mean and sum on random data, where every column holds about 1/V of each
// row's softmax, far above the LSE's bound (realistic data's last column may
// hold almost none).
class CheckOutputsRandom : public CheckOutputs {};

TEST_P(CheckOutputs, ExactOutputsRoundedAsAStageWritesThemPass) {
  const Fixture f = fixture();
  const CheckReport report = check(f, outputs_from(f.p, f.ref));
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(report.note, "full check: every output element");
  ASSERT_EQ(report.comparisons.size(), 4u);  // lse, loss, dE, dC
  for (const auto& c : report.comparisons) {
    EXPECT_TRUE(c.passed()) << c.summary();
    std::printf("%s\n", c.summary().c_str());
  }
}


TEST_P(CheckOutputsRandom, LseWithoutTheLastVocabularyColumnFails) {
  const Fixture f = fixture();
  HostOutputs out = outputs_from(f.p, f.ref);
  const int64_t last = f.p.v - 1;
  for (int64_t i = 0; i < f.p.n; ++i) {
    double z = 0.0;
    for (int64_t k = 0; k < f.p.d; ++k) z += double(f.in.e[i * f.p.d + k]) * f.in.c[last * f.p.d + k];
    if (f.p.has_softcap()) z = f.p.softcap * std::tanh(z / f.p.softcap);
    out.lse[i] = static_cast<float>(f.ref.lse[i] + std::log1p(-std::exp(z - f.ref.lse[i])));
  }
  const CheckReport report = check(f, out);
  ASSERT_NE(find(report, "lse"), nullptr);
  EXPECT_FALSE(find(report, "lse")->passed()) << find(report, "lse")->summary();
}

TEST_P(CheckOutputs, OneGradientElementOfTheWrongSignFails) {
  const Fixture f = fixture();
  HostOutputs out = outputs_from(f.p, f.ref);
  // The largest |dE| element of a row with a gradient.
  size_t worst = 0;
  for (size_t x = 0; x < out.de.size(); ++x)
    if (std::fabs(out.de[x]) > std::fabs(out.de[worst])) worst = x;
  out.de[worst] = -out.de[worst];
  const CheckReport report = check(f, out);
  expect_only_failure(report, "dE");
  EXPECT_EQ(find(report, "dE")->mismatches, 1);
}

TEST_P(CheckOutputs, SwappedGradientRowsFail) {
  const Fixture f = fixture();
  HostOutputs out = outputs_from(f.p, f.ref);
  int64_t a = 0;  // two rows with a gradient
  while (f.in.targets[a] == f.p.ignore_index) ++a;
  int64_t b = a + 1;
  while (f.in.targets[b] == f.p.ignore_index) ++b;
  for (int64_t k = 0; k < f.p.d; ++k) std::swap(out.de[a * f.p.d + k], out.de[b * f.p.d + k]);
  expect_only_failure(check(f, out), "dE");
}

TEST_P(CheckOutputs, ZeroDcFailsNearlyEverywhere) {
  const Fixture f = fixture();
  HostOutputs out = outputs_from(f.p, f.ref);
  std::fill(out.dc.begin(), out.dc.end(), 0.0f);
  const CheckReport report = check(f, out);
  expect_only_failure(report, "dC");
  int64_t nonzero = 0;
  for (double x : f.ref.dc) nonzero += x != 0.0;
  EXPECT_GT(find(report, "dC")->mismatches, nonzero * 9 / 10) << "a zero dC must fail on most elements";
}

TEST_P(CheckOutputs, MissingOrShortDcFails) {
  const Fixture f = fixture();
  HostOutputs out = outputs_from(f.p, f.ref);
  out.dc.clear();
  expect_only_failure(check(f, out), "dC");
  out = outputs_from(f.p, f.ref);
  out.dc.resize(out.dc.size() - static_cast<size_t>(f.p.d));
  expect_only_failure(check(f, out), "dC");
  out = outputs_from(f.p, f.ref);
  out.de.resize(out.de.size() - 1);
  expect_only_failure(check(f, out), "dE");
}

TEST_P(CheckOutputs, NanLossFails) {
  const Fixture f = fixture();
  HostOutputs out = outputs_from(f.p, f.ref);
  int64_t valid = 0;
  while (f.in.targets[valid] == f.p.ignore_index) ++valid;
  out.loss[f.p.reduction == Reduction::kNone ? valid : 0] = std::numeric_limits<float>::quiet_NaN();
  expect_only_failure(check(f, out), "loss");
}

TEST_P(CheckOutputsRandom, TheOtherReductionFails) {
  const Fixture f = fixture();
  Problem other = f.p;
  other.reduction = f.p.reduction == Reduction::kMean ? Reduction::kSum : Reduction::kMean;
  ReferenceOptions opt;
  opt.backward = true;
  opt.upstream = f.upstream;
  const HostOutputs out = outputs_from(other, reference_cross_entropy(other, f.in, opt));
  const CheckReport report = check(f, out);
  EXPECT_FALSE(report.passed());
  EXPECT_FALSE(find(report, "loss")->passed());
  EXPECT_FALSE(find(report, "dE")->passed());
  EXPECT_FALSE(find(report, "dC")->passed());
}

// A stage that leaves out the gradient terms with |u_ij| < eps (stage 07's
// filter, entry by entry here: the most it may leave out) passes when the
// check is told eps, fails when it is not; and a stage that leaves out twice
// as much (2·eps) as it says fails too.
std::vector<std::vector<double>> gradient_without_small_terms(const Fixture& f, double eps) {
  const Problem& p = f.p;
  const int64_t n_valid = count_valid_targets(p, f.in.targets);
  std::vector<double> de(f.ref.de), dc(f.ref.dc);
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t t = f.in.targets[i];
    const double g = upstream_for_token(p, f.upstream, n_valid, i, t);
    if (g == 0.0) continue;
    for (int64_t j = 0; j < p.v; ++j) {
      double z = 0.0;
      for (int64_t k = 0; k < p.d; ++k) z += double(f.in.e[i * p.d + k]) * f.in.c[j * p.d + k];
      double derivative = 1.0;
      if (p.has_softcap()) {
        z = p.softcap * std::tanh(z / p.softcap);
        derivative = 1.0 - (z / p.softcap) * (z / p.softcap);
      }
      const double u = (std::exp(z - f.ref.lse[i]) - (j == t ? 1.0 : 0.0)) * derivative;
      if (std::fabs(u) >= eps) continue;
      for (int64_t k = 0; k < p.d; ++k) {
        de[i * p.d + k] -= g * u * f.in.c[j * p.d + k];
        dc[j * p.d + k] -= g * u * f.in.e[i * p.d + k];
      }
    }
  }
  return {de, dc};
}

TEST(CheckOutputsApproximation, LeftOutTermsPassOnlyWithinWhatTheStageDeclares) {
  const Fixture f = make_fixture(Dtype::kBFloat16, Reduction::kMean, 0.0f, DataMode::kRealistic, 0.1);
  const double eps = 0x1p-8;
  const auto filtered = gradient_without_small_terms(f, eps);
  HostOutputs out = outputs_from(f.p, f.ref);
  out.de = as_float(filtered[0], true);
  out.dc = as_float(filtered[1], true);
  const CheckReport declared = check(f, out, GradientApproximation{eps, false});
  EXPECT_TRUE(declared.passed());
  for (const auto& c : declared.comparisons) EXPECT_TRUE(c.passed()) << c.summary();
  const CheckReport exact = check(f, out);
  EXPECT_FALSE(find(exact, "dE")->passed()) << "left-out terms passed an exact check: " << find(exact, "dE")->summary();
  EXPECT_FALSE(find(exact, "dC")->passed()) << find(exact, "dC")->summary();

  const auto more = gradient_without_small_terms(f, 4 * eps);
  out.de = as_float(more[0], true);
  out.dc = as_float(more[1], true);
  const CheckReport beyond = check(f, out, GradientApproximation{eps, false});
  EXPECT_FALSE(find(beyond, "dE")->passed()) << find(beyond, "dE")->summary();
}

// A stage that makes S_ij = α_i·q_ij (stage 10's bf16 chunks: q = exp(z − z_t)
// rounded to bf16, the target's entry 0 and its term S_it added apart, α_i =
// g_i·exp(z_t − LSE_i)) declares that dC's product takes α_i·E_i rounded to
// bf16 and that a target token's row may have its product part rounded before
// the target terms join it (GradientApproximation::scaled_rows_rounding): the
// gradient made that way, every row's product part rounded first (the most the
// declaration allows), passes the check with the declaration, and the same
// with α_i·E_i rounded to 4 significant bits fails it.
double round_to_bits(double x, int bits) {  // to nearest (no subnormals at these sizes)
  if (x == 0.0 || !std::isfinite(x)) return x;
  int exponent = 0;
  const double mantissa = std::frexp(x, &exponent);
  return std::ldexp(std::nearbyint(std::ldexp(mantissa, bits)), exponent - bits);
}

std::vector<std::vector<double>> gradient_from_scaled_rows(const Fixture& f, int scaled_row_bits) {
  const Problem& p = f.p;
  const int64_t n_valid = count_valid_targets(p, f.in.targets);
  std::vector<double> de(static_cast<size_t>(p.n * p.d), 0.0), product(static_cast<size_t>(p.v * p.d), 0.0);
  std::vector<double> target_part(static_cast<size_t>(p.v * p.d), 0.0), z(p.v), scaled_row(p.d);
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t t = f.in.targets[i];
    const double g = upstream_for_token(p, f.upstream, n_valid, i, t);
    if (g == 0.0) continue;
    for (int64_t j = 0; j < p.v; ++j) {
      z[j] = 0.0;
      for (int64_t k = 0; k < p.d; ++k) z[j] += double(f.in.e[i * p.d + k]) * f.in.c[j * p.d + k];
    }
    const double alpha = g * std::exp(z[t] - f.ref.lse[i]), target_term = g * std::expm1(z[t] - f.ref.lse[i]);
    for (int64_t k = 0; k < p.d; ++k) scaled_row[k] = round_to_bits(alpha * f.in.e[i * p.d + k], scaled_row_bits);
    for (int64_t j = 0; j < p.v; ++j) {
      const double q = j == t ? 0.0 : round_to_bits(std::exp(z[j] - z[t]), 8);
      for (int64_t k = 0; k < p.d; ++k) {
        de[i * p.d + k] += alpha * q * f.in.c[j * p.d + k];
        product[j * p.d + k] += q * scaled_row[k];
      }
    }
    for (int64_t k = 0; k < p.d; ++k) {  // the target's term, apart
      de[i * p.d + k] += target_term * f.in.c[t * p.d + k];
      target_part[t * p.d + k] += target_term * f.in.e[i * p.d + k];
    }
  }
  std::vector<double> dc(product.size());
  for (size_t x = 0; x < dc.size(); ++x) dc[x] = round_to_bits(product[x], 8) + target_part[x];
  return {de, dc};
}

TEST(CheckOutputsApproximation, ScaledRowsPassWithinWhatTheStageDeclares) {
  const Fixture f = make_fixture(Dtype::kBFloat16, Reduction::kMean, 0.0f, DataMode::kRealistic, 0.1);
  const GradientApproximation scaled{0.0, false, kBf16Unit};
  HostOutputs out = outputs_from(f.p, f.ref);
  const auto made = gradient_from_scaled_rows(f, 8);
  out.de = as_float(made[0], true);
  out.dc = as_float(made[1], true);
  const CheckReport declared = check(f, out, scaled);
  for (const auto& c : declared.comparisons) EXPECT_TRUE(c.passed()) << c.summary();
  const auto coarse = gradient_from_scaled_rows(f, 4);
  out.dc = as_float(coarse[1], true);
  const CheckReport beyond = check(f, out, scaled);
  EXPECT_FALSE(find(beyond, "dC")->passed()) << "rows of E rounded to 4 bits passed: " << find(beyond, "dC")->summary();
}

TEST(CheckOutputsSampled, ACorruptSampledRowFails) {
  const Fixture f = make_fixture(Dtype::kFloat32, Reduction::kNone, 0.0f, DataMode::kRandom, 0.0);
  HostOutputs out = outputs_from(f.p, f.ref);
  // Sampling: N·V > full_limit. Row 0 is always among the sampled rows.
  const auto sampled = [&](const HostOutputs& o) {
    return check_outputs(f.p, f.in, o, f.upstream, true, /*full_limit=*/1000, 8);
  };
  const CheckReport good = sampled(out);
  EXPECT_TRUE(good.passed());
  EXPECT_NE(good.note.find("sampled check: 8 of 77 rows"), std::string::npos) << good.note;
  EXPECT_EQ(find(good, "dC"), nullptr) << "dC needs every row";
  out.lse[0] += 1e-3f;
  expect_only_failure(sampled(out), "lse");
  out = outputs_from(f.p, f.ref);
  out.de[3] = -out.de[3] + 1.0f;
  expect_only_failure(sampled(out), "dE");
}

std::string case_name(const testing::TestParamInfo<int>& info) {
  const char* names[] = {"fp32_mean_random", "bf16_none_softcap_ignore_realistic", "bf16_sum_ignore_random"};
  return names[info.param];
}
INSTANTIATE_TEST_SUITE_P(Cases, CheckOutputsRandom, testing::Values(0, 2), case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CheckOutputs, testing::Values(0, 1, 2), case_name);

}  // namespace
}  // namespace cce
