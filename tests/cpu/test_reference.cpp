// Properties of the CPU reference (common/reference.h), checked against
// closed forms, an independent loop-by-loop implementation written here, and
// central finite differences of the reference's own loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/reference.h"

namespace cce {
namespace {

Problem make_problem(int64_t n, int64_t d, int64_t v, Reduction reduction = Reduction::kMean, float softcap = 0.0f) {
  Problem p;
  p.n = n;
  p.d = d;
  p.v = v;
  p.dtype = Dtype::kFloat32;
  p.reduction = reduction;
  p.softcap = softcap;
  return p;
}

// E ~ N(0,1), C ~ N(0, c_std²), targets uniform over [0,V). logit std ≈ c_std·√D.
HostInputs random_inputs(const Problem& p, uint64_t seed, double c_std) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int64_t> token(0, p.v - 1);
  HostInputs in;
  in.n = p.n;
  in.d = p.d;
  in.v = p.v;
  in.e.resize(p.n * p.d);
  in.c.resize(p.v * p.d);
  in.targets.resize(p.n);
  for (float& x : in.e) x = static_cast<float>(normal(rng));
  for (float& x : in.c) x = static_cast<float>(c_std * normal(rng));
  for (int64_t& t : in.targets) t = token(rng);
  return in;
}

// Logit std ≈ 2: a softmax that is neither flat nor one-hot.
HostInputs random_inputs(const Problem& p, uint64_t seed) { return random_inputs(p, seed, 2.0 / std::sqrt(p.d)); }

// An independent, loop-by-loop implementation of problem.h's definition, in
// double (no Eigen, no blocking, no max-subtraction shared with the reference).
struct Naive {
  std::vector<double> lse, loss_per_token, de, dc;
  double loss = 0.0;  // mean or sum
};

Naive naive_reference(const Problem& p, const HostInputs& in, const std::vector<float>& upstream) {
  const int64_t N = p.n, D = p.d, V = p.v;
  Naive r;
  r.lse.assign(N, 0.0);
  r.loss_per_token.assign(N, 0.0);
  r.de.assign(N * D, 0.0);
  r.dc.assign(V * D, 0.0);
  int64_t valid = 0;
  for (int64_t t : in.targets) valid += t != p.ignore_index;
  std::vector<double> z(V), zcap(V);
  double sum = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < V; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < D; ++k) acc += static_cast<double>(in.e[i * D + k]) * in.c[j * D + k];
      z[j] = acc;
      zcap[j] = p.softcap > 0 ? p.softcap * std::tanh(acc / p.softcap) : acc;
    }
    double m = zcap[0];
    for (double x : zcap) m = std::max(m, x);
    double s = 0.0;
    for (double x : zcap) s += std::exp(x - m);
    r.lse[i] = m + std::log(s);
    const int64_t t = in.targets[i];
    if (t == p.ignore_index) continue;
    r.loss_per_token[i] = r.lse[i] - zcap[t];
    sum += r.loss_per_token[i];
    double g = p.reduction == Reduction::kMean ? upstream[0] / static_cast<double>(valid)
               : p.reduction == Reduction::kSum ? upstream[0]
                                                : upstream[i];
    for (int64_t j = 0; j < V; ++j) {
      double dz = std::exp(zcap[j] - r.lse[i]) - (j == t ? 1.0 : 0.0);
      if (p.softcap > 0) {
        double th = std::tanh(z[j] / p.softcap);
        dz *= 1.0 - th * th;
      }
      dz *= g;
      for (int64_t k = 0; k < D; ++k) {
        r.de[i * D + k] += dz * in.c[j * D + k];
        r.dc[j * D + k] += dz * in.e[i * D + k];
      }
    }
  }
  r.loss = p.reduction == Reduction::kMean ? (valid ? sum / valid : 0.0) : sum;
  return r;
}

ReferenceResult run_reference(const Problem& p, const HostInputs& in, bool backward,
                              std::vector<float> upstream = {1.0f}, std::vector<int64_t> rows = {}) {
  ReferenceOptions opt;
  opt.backward = backward;
  opt.upstream = std::move(upstream);
  opt.rows = std::move(rows);
  return reference_cross_entropy(p, in, opt);
}

double max_abs_of(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Elementwise |got − want| <= atol + rtol·|want|, reporting the first few misses.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol) && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i] << " (tol " << tol << ")";
  }
}

// Gradients: atol relative to the largest entry (cancellation makes small
// entries only as accurate as the scale), rtol for the rest.
void expect_close_scaled(const std::vector<double>& got, const std::vector<double>& want, double rel,
                         const std::string& what) {
  expect_close(got, want, rel * std::max(max_abs_of(want), 1e-300), rel, what);
}

std::vector<double> row_of(const std::vector<double>& m, int64_t row, int64_t cols) {
  return std::vector<double>(m.begin() + row * cols, m.begin() + (row + 1) * cols);
}

// ---------------------------------------------------------------------------

TEST(Reference, ConstantLogitsGiveLogV) {
  // C = 0: every logit is 0, softmax is uniform, LSE = loss = log V.
  for (float softcap : {0.0f, 5.0f}) {
    Problem p = make_problem(7, 5, 13, Reduction::kMean, softcap);
    HostInputs in = random_inputs(p, 11);
    std::fill(in.c.begin(), in.c.end(), 0.0f);
    ReferenceResult r = run_reference(p, in, true);
    const double log_v = std::log(13.0);
    for (int64_t i = 0; i < p.n; ++i) {
      EXPECT_NEAR(r.lse[i], log_v, 1e-12) << "token " << i;
      EXPECT_NEAR(r.loss_per_token[i], log_v, 1e-12) << "token " << i;
    }
    EXPECT_NEAR(r.loss, log_v, 1e-12);
    // dE_i = Σ_j dlogit_ij C_j = 0, dC_j = Σ_i (1/N)(1/V − [j = t_i]) E_i.
    for (double x : r.de) EXPECT_EQ(x, 0.0);
    std::vector<double> dc(p.v * p.d, 0.0);
    for (int64_t i = 0; i < p.n; ++i)
      for (int64_t j = 0; j < p.v; ++j)
        for (int64_t k = 0; k < p.d; ++k)
          dc[j * p.d + k] += (1.0 / p.v - (j == in.targets[i])) / p.n * in.e[i * p.d + k];
    expect_close(r.dc, dc, 1e-13, 1e-12, "dc");
  }
  // E = 0 at the larger odd size (the logits are zero through the other factor).
  Problem p = make_problem(77, 100, 1129);
  HostInputs in = random_inputs(p, 12);
  std::fill(in.e.begin(), in.e.end(), 0.0f);
  ReferenceResult r = run_reference(p, in, false);
  for (int64_t i = 0; i < p.n; ++i) {
    EXPECT_NEAR(r.lse[i], std::log(1129.0), 1e-12);
    EXPECT_NEAR(r.loss_per_token[i], std::log(1129.0), 1e-12);
  }
}

TEST(Reference, ShiftingEveryLogitChangesNothing) {
  // Channel 0 of E is 1 for every token, so adding 100 to channel 0 of every C
  // row adds exactly 100 to every logit. Then LSE moves by 100, the loss and
  // dlogit = g(softmax − onehot) are unchanged, so dC = dlogitᵀE is unchanged,
  // and dE = dlogit·C changes by 100·Σ_j dlogit_ij = 0 in channel 0 (a softmax
  // row minus a one-hot sums to 0): all of dE is unchanged too.
  // C's channel 0 holds multiples of 2^-10 in [-2, 2], so that C + 100 is exact in fp32.
  Problem p = make_problem(77, 100, 1129);
  HostInputs in = random_inputs(p, 21);
  in.targets[5] = p.ignore_index;
  for (int64_t i = 0; i < p.n; ++i) in.e[i * p.d] = 1.0f;
  for (int64_t j = 0; j < p.v; ++j) {
    float& x = in.c[j * p.d];
    x = std::clamp(std::round(x * 1024.0f) / 1024.0f, -2.0f, 2.0f);
  }
  HostInputs shifted = in;
  for (int64_t j = 0; j < p.v; ++j) {
    shifted.c[j * p.d] += 100.0f;
    ASSERT_EQ(static_cast<double>(shifted.c[j * p.d]), static_cast<double>(in.c[j * p.d]) + 100.0);
  }
  ReferenceResult a = run_reference(p, in, true), b = run_reference(p, shifted, true);
  for (int64_t i = 0; i < p.n; ++i) {
    EXPECT_NEAR(b.lse[i] - 100.0, a.lse[i], 1e-10) << "token " << i;
    EXPECT_NEAR(b.loss_per_token[i], a.loss_per_token[i], 1e-10) << "token " << i;
  }
  EXPECT_NEAR(b.loss, a.loss, 1e-10);
  // Channel 0 of dE sums V terms of size ~100·g: a cancellation whose rounding
  // is ~100·V·2^-53·g, far below 1e-9 of the scale.
  expect_close_scaled(b.de, a.de, 1e-9, "de");
  expect_close_scaled(b.dc, a.dc, 1e-9, "dc");
}

TEST(Reference, TargetsAtBothEndsOfTheVocabulary) {
  struct Size {
    int64_t n, d, v;
  };
  for (Size s : {Size{7, 5, 13}, Size{77, 100, 1129}}) {
    Problem p = make_problem(s.n, s.d, s.v);
    HostInputs in = random_inputs(p, 31 + s.v);
    for (int64_t i = 0; i < p.n; ++i) in.targets[i] = i % 2 == 0 ? 0 : p.v - 1;
    ReferenceResult r = run_reference(p, in, false);
    for (int64_t i = 0; i < p.n; ++i) {
      // Hand-computed log-sum-exp over the row, in double.
      std::vector<double> z(p.v);
      for (int64_t j = 0; j < p.v; ++j) {
        z[j] = 0.0;
        for (int64_t k = 0; k < p.d; ++k) z[j] += static_cast<double>(in.e[i * p.d + k]) * in.c[j * p.d + k];
      }
      double m = *std::max_element(z.begin(), z.end()), s_exp = 0.0;
      for (double x : z) s_exp += std::exp(x - m);
      const double lse = m + std::log(s_exp);
      EXPECT_NEAR(r.lse[i], lse, 1e-10 * std::max(1.0, std::fabs(lse))) << "V=" << p.v << " token " << i;
      EXPECT_NEAR(r.loss_per_token[i], lse - z[in.targets[i]], 1e-10 * std::max(1.0, std::fabs(lse)))
          << "V=" << p.v << " token " << i << " target " << in.targets[i];
    }
  }
}

TEST(Reference, MatchesNaiveLoopAcrossTheVocabularyBlock) {
  // The reference converts C in blocks of 4096 rows: V = 4096 + 13 has a
  // partial second block. Forward and backward against the naive loop, with
  // softcap, an ignored token and per-token upstream.
  Problem p = make_problem(5, 7, 4096 + 13, Reduction::kNone, 3.0f);
  HostInputs in = random_inputs(p, 41);
  in.targets[0] = 4096;
  in.targets[1] = p.v - 1;
  in.targets[3] = p.ignore_index;
  std::vector<float> upstream = {0.5f, 1.25f, -0.75f, 2.0f, 1.0f};
  ReferenceResult r = run_reference(p, in, true, upstream);
  Naive want = naive_reference(p, in, upstream);
  expect_close(r.lse, want.lse, 1e-12, 1e-12, "lse");
  expect_close(r.loss_per_token, want.loss_per_token, 1e-12, 1e-12, "loss");
  expect_close_scaled(r.de, want.de, 1e-10, "de");
  expect_close_scaled(r.dc, want.dc, 1e-10, "dc");
}

TEST(Reference, IgnoredTokensContributeNothing) {
  const int64_t ignored[] = {1, 4};
  for (Reduction reduction : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    SCOPED_TRACE(to_string(reduction));
    Problem p = make_problem(7, 5, 13, reduction);
    HostInputs in = random_inputs(p, 51);
    for (int64_t i : ignored) in.targets[i] = p.ignore_index;
    std::vector<float> upstream = reduction == Reduction::kNone
                                      ? std::vector<float>{0.5f, 3.0f, 1.5f, 0.25f, 4.0f, 1.0f, 2.0f}
                                      : std::vector<float>{1.0f};
    ReferenceResult r = run_reference(p, in, true, upstream);
    for (int64_t i : ignored) {
      EXPECT_EQ(r.loss_per_token[i], 0.0);
      EXPECT_TRUE(std::isfinite(r.lse[i]));
      for (int64_t k = 0; k < p.d; ++k) EXPECT_EQ(r.de[i * p.d + k], 0.0) << "token " << i;
    }
    // The same problem without the ignored rows: same per-token results, and,
    // since #valid is the same, the same reduced loss and dC.
    Problem q = p;
    q.n = 5;
    HostInputs kept;
    kept.n = q.n;
    kept.d = p.d;
    kept.v = p.v;
    kept.c = in.c;
    std::vector<float> kept_upstream = reduction == Reduction::kNone ? std::vector<float>{} : upstream;
    for (int64_t i = 0; i < p.n; ++i) {
      if (i == ignored[0] || i == ignored[1]) continue;
      kept.e.insert(kept.e.end(), in.e.begin() + i * p.d, in.e.begin() + (i + 1) * p.d);
      kept.targets.push_back(in.targets[i]);
      if (reduction == Reduction::kNone) kept_upstream.push_back(upstream[i]);
    }
    ReferenceResult k = run_reference(q, kept, true, kept_upstream);
    if (reduction != Reduction::kNone) {
      EXPECT_NEAR(r.loss, k.loss, 1e-12 * std::fabs(k.loss));
    }
    expect_close_scaled(r.dc, k.dc, 1e-12, "dc");
    for (int64_t i = 0, row = 0; i < p.n; ++i) {
      if (i == ignored[0] || i == ignored[1]) continue;
      EXPECT_NEAR(r.loss_per_token[i], k.loss_per_token[row], 1e-12);
      expect_close_scaled(row_of(r.de, i, p.d), row_of(k.de, row, p.d), 1e-12, "de row " + std::to_string(i));
      ++row;
    }
    // The mean divides by the 5 valid tokens, not by N = 7.
    if (reduction == Reduction::kMean) {
      double sum = 0.0;
      for (double x : r.loss_per_token) sum += x;
      EXPECT_NEAR(r.loss, sum / 5.0, 1e-12);
    }
  }
}

TEST(Reference, CustomIgnoreIndex) {
  Problem p = make_problem(7, 5, 13);
  p.ignore_index = -1;
  HostInputs in = random_inputs(p, 61);
  in.targets[2] = -1;
  ReferenceResult r = run_reference(p, in, true);
  EXPECT_EQ(r.loss_per_token[2], 0.0);
  for (int64_t k = 0; k < p.d; ++k) EXPECT_EQ(r.de[2 * p.d + k], 0.0);
  Naive want = naive_reference(p, in, {1.0f});
  EXPECT_NEAR(r.loss, want.loss, 1e-12);
  // -100 is now an ordinary (out-of-range) target.
  in.targets[2] = -100;
  EXPECT_THROW(run_reference(p, in, false), InputError);
}

TEST(Reference, AllTokensIgnored) {
  // problem.h: with no valid token the loss is 0 and every gradient is 0.
  for (Reduction reduction : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    for (float softcap : {0.0f, 4.0f}) {
      SCOPED_TRACE(std::string(to_string(reduction)) + " softcap " + std::to_string(softcap));
      Problem p = make_problem(7, 5, 13, reduction, softcap);
      HostInputs in = random_inputs(p, 71);
      std::fill(in.targets.begin(), in.targets.end(), p.ignore_index);
      std::vector<float> upstream(reduction == Reduction::kNone ? 7 : 1, 1.5f);
      ReferenceResult r = run_reference(p, in, true, upstream);
      if (reduction != Reduction::kNone) {
        EXPECT_EQ(r.loss, 0.0);
      }
      for (double x : r.loss_per_token) EXPECT_EQ(x, 0.0);
      for (double x : r.lse) EXPECT_TRUE(std::isfinite(x));
      ASSERT_EQ(r.de.size(), static_cast<size_t>(p.n * p.d));
      ASSERT_EQ(r.dc.size(), static_cast<size_t>(p.v * p.d));
      for (double x : r.de) EXPECT_EQ(x, 0.0);
      for (double x : r.dc) EXPECT_EQ(x, 0.0);
    }
  }
}

TEST(Reference, ReductionsAgree) {
  Problem p = make_problem(77, 100, 1129);
  HostInputs in = random_inputs(p, 81);
  for (int64_t i = 3; i < p.n; i += 9) in.targets[i] = p.ignore_index;
  const int64_t valid = count_valid_targets(p, in.targets);
  ASSERT_EQ(valid, 77 - 9);

  p.reduction = Reduction::kMean;
  ReferenceResult mean = run_reference(p, in, true);
  ReferenceResult mean_scaled = run_reference(p, in, true, {2.5f});
  p.reduction = Reduction::kSum;
  ReferenceResult sum = run_reference(p, in, true);
  p.reduction = Reduction::kNone;
  std::vector<float> upstream(p.n);
  std::mt19937_64 rng(82);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (float& g : upstream) g = u(rng);
  ReferenceResult none = run_reference(p, in, true, upstream);

  double total = 0.0;
  for (double x : sum.loss_per_token) total += x;
  EXPECT_NEAR(sum.loss, total, 1e-10 * total);
  EXPECT_NEAR(sum.loss, mean.loss * valid, 1e-10 * sum.loss);
  expect_close(none.loss_per_token, mean.loss_per_token, 0.0, 1e-14, "none vs mean per-token loss");
  expect_close(none.lse, mean.lse, 0.0, 1e-14, "none vs mean lse");

  // g_i = upstream/#valid (mean), upstream (sum), upstream_i (none).
  std::vector<double> de_from_mean(mean.de), de_from_sum_scaled(sum.de), dc_from_mean(mean.dc);
  for (double& x : de_from_mean) x *= valid;
  for (double& x : dc_from_mean) x *= valid;
  expect_close_scaled(sum.de, de_from_mean, 1e-12, "sum de vs #valid * mean de");
  expect_close_scaled(sum.dc, dc_from_mean, 1e-12, "sum dc vs #valid * mean dc");
  std::vector<double> mean_times_2_5(mean.de);
  for (double& x : mean_times_2_5) x *= 2.5;
  expect_close_scaled(mean_scaled.de, mean_times_2_5, 1e-12, "mean de with upstream 2.5");
  for (int64_t i = 0; i < p.n; ++i)
    for (int64_t k = 0; k < p.d; ++k) de_from_sum_scaled[i * p.d + k] *= upstream[i];
  expect_close_scaled(none.de, de_from_sum_scaled, 1e-12, "none de vs upstream_i * sum de");
}

TEST(Reference, NoneUpstreamScalesEachTokensContribution) {
  // dC for reduction none with upstream g equals Σ_i g_i dC_i, where dC_i is
  // the gradient of token i alone (every other token ignored, sum reduction).
  Problem p = make_problem(7, 5, 13, Reduction::kNone);
  HostInputs in = random_inputs(p, 91);
  in.targets[6] = p.ignore_index;
  std::vector<float> upstream = {0.5f, -1.5f, 2.0f, 0.0f, 3.0f, 1.0f, 7.0f};
  ReferenceResult none = run_reference(p, in, true, upstream);
  std::vector<double> dc(p.v * p.d, 0.0);
  Problem single = p;
  single.reduction = Reduction::kSum;
  for (int64_t i = 0; i < p.n; ++i) {
    if (in.targets[i] == p.ignore_index) continue;
    HostInputs one = in;
    for (int64_t o = 0; o < p.n; ++o)
      if (o != i) one.targets[o] = p.ignore_index;
    ReferenceResult r = run_reference(single, one, true);
    for (size_t x = 0; x < dc.size(); ++x) dc[x] += upstream[i] * r.dc[x];
    std::vector<double> row = row_of(r.de, i, p.d);
    for (double& x : row) x *= upstream[i];
    expect_close_scaled(row_of(none.de, i, p.d), row, 1e-12, "de row " + std::to_string(i));
  }
  expect_close_scaled(none.dc, dc, 1e-12, "dc");
  for (int64_t k = 0; k < p.d; ++k) EXPECT_EQ(none.de[3 * p.d + k], 0.0) << "upstream 0 gives a zero row";
}

TEST(Reference, SoftcapIsTanhOfTheLogits) {
  struct Case {
    int64_t n, d, v;
    double c_std;  // times 1/√D
    float softcap;
  };
  for (Case c : {Case{7, 5, 13, 4.0, 2.0f}, Case{77, 100, 1129, 4.0, 3.0f}, Case{77, 100, 1129, 4.0, 30.0f}}) {
    SCOPED_TRACE("V=" + std::to_string(c.v) + " softcap " + std::to_string(c.softcap));
    Problem p = make_problem(c.n, c.d, c.v, Reduction::kSum, c.softcap);
    HostInputs in = random_inputs(p, 101 + c.v, c.c_std / std::sqrt(c.d));
    ReferenceResult r = run_reference(p, in, false);
    double total_capped = 0.0;
    for (int64_t i = 0; i < p.n; ++i) {
      // loss on s·tanh(z/s), by hand.
      std::vector<double> z(p.v);
      for (int64_t j = 0; j < p.v; ++j) {
        double acc = 0.0;
        for (int64_t k = 0; k < p.d; ++k) acc += static_cast<double>(in.e[i * p.d + k]) * in.c[j * p.d + k];
        z[j] = c.softcap * std::tanh(acc / c.softcap);
      }
      double m = *std::max_element(z.begin(), z.end()), s_exp = 0.0;
      for (double x : z) s_exp += std::exp(x - m);
      double loss = m + std::log(s_exp) - z[in.targets[i]];
      EXPECT_NEAR(r.loss_per_token[i], loss, 1e-10 * std::max(1.0, loss)) << "token " << i;
      total_capped += loss;
    }
    EXPECT_NEAR(r.loss, total_capped, 1e-10 * total_capped);
    // The softcap matters at these logit scales (std 4), so the check above has teeth.
    Problem plain = p;
    plain.softcap = 0.0f;
    EXPECT_GT(std::fabs(run_reference(plain, in, false).loss - r.loss), 1e-3 * r.loss);
  }
}

TEST(Reference, LargeSoftcapApproachesNoSoftcap) {
  // s·tanh(z/s) = z − z³/(3s²) + …: with |z| ≲ 20 and s = 1e5 the logits move
  // by < 3e-7, and the gradient factor 1 − tanh² by < 4e-8.
  Problem p = make_problem(77, 100, 1129, Reduction::kMean, 1e5f);
  HostInputs in = random_inputs(p, 111, 4.0 / std::sqrt(100.0));
  Problem plain = p;
  plain.softcap = 0.0f;
  ReferenceResult a = run_reference(p, in, true), b = run_reference(plain, in, true);
  EXPECT_NEAR(a.loss, b.loss, 1e-6 * b.loss);
  expect_close(a.loss_per_token, b.loss_per_token, 1e-6, 1e-6, "loss");
  expect_close_scaled(a.de, b.de, 1e-5, "de");
  expect_close_scaled(a.dc, b.dc, 1e-5, "dc");
  // And a moderate softcap does not (the tolerance above is meaningful).
  Problem moderate = p;
  moderate.softcap = 5.0f;
  EXPECT_GT(std::fabs(run_reference(moderate, in, false).loss - b.loss), 1e-3 * b.loss);
}

// --- Finite differences --------------------------------------------------------

struct FdCase {
  Reduction reduction;
  float softcap;
};

void PrintTo(const FdCase& c, std::ostream* os) { *os << to_string(c.reduction) << " softcap " << c.softcap; }

std::string fd_name(const ::testing::TestParamInfo<FdCase>& info) {
  return std::string(to_string(info.param.reduction)) + (info.param.softcap > 0 ? "_softcap" : "_plain");
}

class ReferenceFiniteDifferences : public ::testing::TestWithParam<FdCase> {};

TEST_P(ReferenceFiniteDifferences, GradientsMatchCentralDifferences) {
  // N=3 D=4 V=5, targets {0, ignored, V−1}. The scalar whose gradient the
  // reference returns: L = u·loss (mean, sum), L = Σ u_i loss_i (none).
  // Central differences with h = 1e-3 have a truncation error h²/6·|L'''| ≈
  // 2e-7·|L'''| (L''' = O(1) for logits of std ~2 and softcap 2); the loss is
  // a double of float inputs, so its rounding is ~1e-16 and the step used is
  // the one actually taken by the float, fl(x±h) − x, not 2h. A tolerance of
  // 1e-6 + 1e-4·|grad| leaves a wide margin while any wrong factor (1/#valid,
  // the softcap derivative, a transposition) is off by far more.
  const FdCase c = GetParam();
  Problem p = make_problem(3, 4, 5, c.reduction, c.softcap);
  HostInputs in = random_inputs(p, 121, 1.0);
  in.targets = {0, p.ignore_index, 4};
  const std::vector<float> upstream =
      c.reduction == Reduction::kNone ? std::vector<float>{0.7f, 1.3f, -0.4f} : std::vector<float>{1.7f};

  auto objective = [&](const HostInputs& x) {
    ReferenceResult r = run_reference(p, x, false);
    if (c.reduction != Reduction::kNone) return upstream[0] * r.loss;
    double l = 0.0;
    for (int64_t i = 0; i < p.n; ++i) l += upstream[i] * r.loss_per_token[i];
    return l;
  };
  ReferenceResult analytic = run_reference(p, in, true, upstream);
  ASSERT_EQ(analytic.de.size(), 12u);
  ASSERT_EQ(analytic.dc.size(), 20u);

  const float h = 1e-3f;
  double max_error = 0.0, max_share = 0.0;  // largest error, largest error / tolerance
  auto check = [&](std::vector<float> HostInputs::*tensor, const std::vector<double>& grad, const char* name) {
    for (size_t k = 0; k < grad.size(); ++k) {
      HostInputs plus = in, minus = in;
      const float x = (in.*tensor)[k];
      (plus.*tensor)[k] = x + h;
      (minus.*tensor)[k] = x - h;
      const double step = static_cast<double>((plus.*tensor)[k]) - static_cast<double>((minus.*tensor)[k]);
      const double fd = (objective(plus) - objective(minus)) / step;
      const double tol = 1e-6 + 1e-4 * std::fabs(fd);
      max_error = std::max(max_error, std::fabs(fd - grad[k]));
      max_share = std::max(max_share, std::fabs(fd - grad[k]) / tol);
      EXPECT_NEAR(grad[k], fd, tol) << name << "[" << k / p.d << "," << k % p.d << "]";
    }
  };
  check(&HostInputs::e, analytic.de, "de");
  check(&HostInputs::c, analytic.dc, "dc");
  // The ignored token's row is exactly zero (and its differences ~0 above).
  for (int64_t k = 0; k < p.d; ++k) EXPECT_EQ(analytic.de[1 * p.d + k], 0.0);
  // The gradients are not trivially small: the check above compares real values.
  EXPECT_GT(max_abs_of(analytic.de), 0.05);
  EXPECT_GT(max_abs_of(analytic.dc), 0.05);
  std::ostringstream report;
  report << std::setprecision(3) << max_error << " (" << max_share << " of the tolerance)";
  RecordProperty("max_abs_error", report.str());
}

INSTANTIATE_TEST_SUITE_P(AllReductions, ReferenceFiniteDifferences,
                         ::testing::Values(FdCase{Reduction::kMean, 0.0f}, FdCase{Reduction::kSum, 0.0f},
                                           FdCase{Reduction::kNone, 0.0f}, FdCase{Reduction::kMean, 2.0f},
                                           FdCase{Reduction::kSum, 2.0f}, FdCase{Reduction::kNone, 2.0f}),
                         fd_name);

// --- Row subsets and argument checks ----------------------------------------------

TEST(Reference, RowSubsetsMatchTheFullRun) {
  for (Reduction reduction : {Reduction::kMean, Reduction::kNone}) {
    SCOPED_TRACE(to_string(reduction));
    Problem p = make_problem(77, 100, 1129, reduction, 20.0f);
    HostInputs in = random_inputs(p, 131);
    in.targets[13] = p.ignore_index;
    in.targets[50] = p.ignore_index;
    std::vector<float> upstream(reduction == Reduction::kNone ? p.n : 1, 1.0f);
    for (size_t i = 0; i < upstream.size(); ++i) upstream[i] = 0.5f + 0.01f * static_cast<float>(i);
    ReferenceResult full = run_reference(p, in, true, upstream);
    EXPECT_TRUE(full.all_rows);
    ASSERT_EQ(full.rows.size(), 77u);
    for (int64_t i = 0; i < p.n; ++i) EXPECT_EQ(full.rows[i], i);
    EXPECT_EQ(full.de.size(), static_cast<size_t>(p.n * p.d));
    EXPECT_EQ(full.dc.size(), static_cast<size_t>(p.v * p.d));

    const std::vector<int64_t> rows = {76, 0, 13, 41, 2};
    ReferenceResult sub = run_reference(p, in, true, upstream, rows);
    EXPECT_FALSE(sub.all_rows);
    EXPECT_EQ(sub.rows, rows);
    ASSERT_EQ(sub.lse.size(), rows.size());
    ASSERT_EQ(sub.loss_per_token.size(), rows.size());
    ASSERT_EQ(sub.de.size(), rows.size() * p.d);
    EXPECT_TRUE(sub.dc.empty()) << "dC needs every row";
    for (size_t k = 0; k < rows.size(); ++k) {
      const int64_t i = rows[k];
      EXPECT_NEAR(sub.lse[k], full.lse[i], 1e-12 * std::fabs(full.lse[i])) << "row " << i;
      EXPECT_NEAR(sub.loss_per_token[k], full.loss_per_token[i], 1e-12 * std::max(1.0, full.loss_per_token[i]))
          << "row " << i;
      expect_close_scaled(row_of(sub.de, k, p.d), row_of(full.de, i, p.d), 1e-12, "de row " + std::to_string(i));
    }
    // A forward-only subset has no gradients at all.
    ReferenceResult fwd = run_reference(p, in, false, {1.0f}, {3});
    EXPECT_TRUE(fwd.de.empty());
    EXPECT_TRUE(fwd.dc.empty());
    EXPECT_NEAR(fwd.lse.at(0), full.lse[3], 1e-12 * std::fabs(full.lse[3]));
  }
}

TEST(Reference, RejectsBadArguments) {
  Problem p = make_problem(7, 5, 13);
  HostInputs in = random_inputs(p, 141);
  EXPECT_THROW(run_reference(p, in, false, {1.0f}, {7}), InputError);
  EXPECT_THROW(run_reference(p, in, false, {1.0f}, {-1}), InputError);
  EXPECT_THROW(run_reference(p, in, true, {1.0f, 2.0f}), InputError);  // mean takes one upstream value
  p.reduction = Reduction::kNone;
  EXPECT_THROW(run_reference(p, in, true, {1.0f}), InputError);  // none takes N
  EXPECT_NO_THROW(run_reference(p, in, true, std::vector<float>(7, 1.0f)));
  HostInputs bad = in;
  bad.targets[3] = 13;
  EXPECT_THROW(run_reference(p, bad, false), InputError);
  bad = in;
  bad.c.pop_back();
  EXPECT_THROW(run_reference(p, bad, false), InputError);
}

TEST(Reference, UpstreamForToken) {
  Problem p = make_problem(4, 2, 3);
  EXPECT_DOUBLE_EQ(upstream_for_token(p, {2.0f}, 4, 1, 0), 0.5);
  EXPECT_EQ(upstream_for_token(p, {2.0f}, 4, 1, p.ignore_index), 0.0);
  EXPECT_EQ(upstream_for_token(p, {2.0f}, 0, 1, 0), 0.0);  // no valid token: defined as 0
  p.reduction = Reduction::kSum;
  EXPECT_DOUBLE_EQ(upstream_for_token(p, {2.0f}, 4, 1, 0), 2.0);
  p.reduction = Reduction::kNone;
  EXPECT_DOUBLE_EQ(upstream_for_token(p, {1.0f, 3.0f, 5.0f, 7.0f}, 4, 2, 1), 5.0);
  EXPECT_EQ(upstream_for_token(p, {1.0f, 3.0f, 5.0f, 7.0f}, 4, 2, p.ignore_index), 0.0);
}

}  // namespace
}  // namespace cce
