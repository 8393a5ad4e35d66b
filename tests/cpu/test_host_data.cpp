// The input generators, bf16 rounding and input validation (common/host_data.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/host_data.h"
#include "common/reference.h"

namespace cce {
namespace {

Problem make_problem(int64_t n, int64_t d, int64_t v, Dtype dtype = Dtype::kFloat32) {
  Problem p;
  p.n = n;
  p.d = d;
  p.v = v;
  p.dtype = dtype;
  return p;
}

HostInputs generate(const Problem& p, DataMode mode, uint64_t seed, double ignore_fraction = 0.0) {
  GeneratorOptions opt;
  opt.mode = mode;
  opt.seed = seed;
  opt.ignore_fraction = ignore_fraction;
  return generate_inputs(p, opt);
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

float round_bf16(float x) { return bf16_bits_to_float(float_to_bf16_bits(x)); }

// Parameterized by the mode's name, so that test names and ctest's listing read well.
class GeneratorTest : public ::testing::TestWithParam<std::string> {
 protected:
  DataMode mode() const { return parse_data_mode(GetParam()); }
};

std::string mode_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

TEST_P(GeneratorTest, DeterministicForASeedAndDifferentAcrossSeeds) {
  Problem p = make_problem(77, 100, 1129);
  HostInputs a = generate(p, mode(), 5), b = generate(p, mode(), 5), c = generate(p, mode(), 6);
  EXPECT_EQ(a.n, 77);
  EXPECT_EQ(a.d, 100);
  EXPECT_EQ(a.v, 1129);
  ASSERT_EQ(a.e.size(), 77u * 100u);
  ASSERT_EQ(a.c.size(), 1129u * 100u);
  ASSERT_EQ(a.targets.size(), 77u);
  EXPECT_EQ(a.e, b.e);
  EXPECT_EQ(a.c, b.c);
  EXPECT_EQ(a.targets, b.targets);
  // Another seed: (almost) every value differs.
  auto differing = [](const auto& x, const auto& y) {
    size_t n = 0;
    for (size_t i = 0; i < x.size(); ++i) n += x[i] != y[i];
    return static_cast<double>(n) / static_cast<double>(x.size());
  };
  EXPECT_GT(differing(a.e, c.e), 0.9);
  // Realistic C shares its channel 0 (the prior, over a seeded permutation) in
  // distribution only; the noise channels differ.
  EXPECT_GT(differing(a.c, c.c), 0.9);
  EXPECT_GT(differing(a.targets, c.targets), 0.5);
  for (float x : a.e) ASSERT_TRUE(std::isfinite(x));
  for (float x : a.c) ASSERT_TRUE(std::isfinite(x));
}

TEST_P(GeneratorTest, IndependentOfTheRowSplit) {
  // One random stream per row: the first 64 rows of a 640-token problem (split
  // over threads) equal a 64-token problem (one thread). C does not depend on N.
  Problem small = make_problem(64, 33, 301), large = make_problem(640, 33, 301);
  HostInputs a = generate(small, mode(), 9), b = generate(large, mode(), 9);
  EXPECT_EQ(a.c, b.c);
  ASSERT_EQ(b.e.size(), 640u * 33u);
  EXPECT_TRUE(std::equal(a.e.begin(), a.e.end(), b.e.begin()));
  EXPECT_TRUE(std::equal(a.targets.begin(), a.targets.end(), b.targets.begin()));
}

TEST_P(GeneratorTest, TargetsInRange) {
  for (int64_t v : {1, 2, 13, 1129}) {
    Problem p = make_problem(300, 8, v);
    HostInputs in = generate(p, mode(), 100 + v);
    for (int64_t t : in.targets) {
      ASSERT_GE(t, 0) << "V=" << v;
      ASSERT_LT(t, v) << "V=" << v;
    }
    EXPECT_NO_THROW(validate_inputs(p, in));
  }
}

TEST_P(GeneratorTest, IgnoreFractionIsTheRequestedShare) {
  // 20000 tokens, fraction f: the count is Binomial(20000, f), std ≤ 71, so
  // ±0.02 (≥ 5.6 std) holds for every seed in practice.
  for (double fraction : {0.1, 0.3, 0.9}) {
    Problem p = make_problem(20000, 4, 13);
    p.ignore_index = -7;
    HostInputs in = generate(p, mode(), 17, fraction);
    const int64_t ignored = p.n - count_valid_targets(p, in.targets);
    EXPECT_NEAR(static_cast<double>(ignored) / static_cast<double>(p.n), fraction, 0.02) << "fraction " << fraction;
    for (int64_t t : in.targets) ASSERT_TRUE(t == -7 || (t >= 0 && t < 13)) << t;
    EXPECT_NO_THROW(validate_inputs(p, in));
  }
  Problem p = make_problem(500, 4, 13);
  EXPECT_EQ(count_valid_targets(p, generate(p, mode(), 18, 0.0).targets), 500);
  EXPECT_EQ(count_valid_targets(p, generate(p, mode(), 18, 1.0).targets), 0);
  // Ignoring only replaces targets: E and C are those without ignoring.
  HostInputs with = generate(p, mode(), 19, 0.5), without = generate(p, mode(), 19, 0.0);
  EXPECT_EQ(with.e, without.e);
  EXPECT_EQ(with.c, without.c);
  for (size_t i = 0; i < with.targets.size(); ++i) {
    if (with.targets[i] != p.ignore_index) {
      EXPECT_EQ(with.targets[i], without.targets[i]);
    }
  }
}

TEST_P(GeneratorTest, Bf16InputsAreTheRoundedFp32Inputs) {
  Problem p32 = make_problem(77, 100, 1129), p16 = make_problem(77, 100, 1129, Dtype::kBFloat16);
  HostInputs a = generate(p32, mode(), 23), b = generate(p16, mode(), 23);
  round_to_bf16(a.e);
  round_to_bf16(a.c);
  EXPECT_EQ(a.e, b.e);
  EXPECT_EQ(a.c, b.c);
  EXPECT_EQ(a.targets, b.targets);
  for (float x : b.e) ASSERT_EQ(bits_of(x) & 0xFFFFu, 0u) << x;
}

TEST_P(GeneratorTest, RejectsBadOptions) {
  Problem p = make_problem(7, 5, 13);
  EXPECT_THROW(generate(p, mode(), 1, 1.5), InputError);
  EXPECT_THROW(generate(p, mode(), 1, -0.1), InputError);
  EXPECT_THROW(generate(p, mode(), 1, std::nan("")), InputError);
  Problem bad = p;
  bad.v = 0;
  EXPECT_THROW(generate(bad, mode(), 1), InputError);
}

INSTANTIATE_TEST_SUITE_P(Modes, GeneratorTest, ::testing::Values("random", "realistic"), mode_name);

TEST(RandomData, Moments) {
  // E ~ N(0,1), C ~ N(0,1/D). 100k samples each: the sample variance has a
  // std of √(2/100k) ≈ 0.0045 (relative), the mean of 0.0032.
  Problem p = make_problem(2000, 50, 2000);
  HostInputs in = generate(p, DataMode::kRandom, 31);
  auto moments = [](const std::vector<float>& x) {
    double s = 0.0, s2 = 0.0;
    for (float v : x) {
      s += v;
      s2 += static_cast<double>(v) * v;
    }
    double mean = s / static_cast<double>(x.size());
    return std::pair<double, double>(mean, s2 / static_cast<double>(x.size()) - mean * mean);
  };
  auto [e_mean, e_var] = moments(in.e);
  auto [c_mean, c_var] = moments(in.c);
  EXPECT_NEAR(e_mean, 0.0, 0.02);
  EXPECT_NEAR(e_var, 1.0, 0.03);
  EXPECT_NEAR(c_mean, 0.0, 0.02 / std::sqrt(50.0));
  EXPECT_NEAR(c_var * 50.0, 1.0, 0.03);
  // Targets uniform: each of the first 10 vocabulary entries ~ N/V = 1 times;
  // instead check the mean target ≈ (V−1)/2 (std of the mean ≈ 577/√2000 ≈ 13).
  double t_mean = 0.0;
  for (int64_t t : in.targets) t_mean += static_cast<double>(t);
  EXPECT_NEAR(t_mean / p.n, 999.5, 80.0);
}

TEST(RealisticData, HeavyHeadedSoftmax) {
  // The realistic mode imitates a trained LM: the loss is well below the
  // uniform log V, and the top token carries a sizeable share of the mass.
  Problem p = make_problem(64, 256, 4096, Dtype::kBFloat16);
  HostInputs in = generate(p, DataMode::kRealistic, 1234);
  ReferenceOptions opt;
  ReferenceResult r = reference_cross_entropy(p, in, opt);
  ASSERT_TRUE(std::isfinite(r.loss));
  EXPECT_GT(r.loss, 0.0);
  EXPECT_LT(r.loss, std::log(4096.0) - 1.0);
  // Mean max probability = mean of exp(max_j logit_ij − LSE_i).
  double mean_max_p = 0.0, mean_entropy = 0.0;
  std::vector<double> z(p.v);
  for (int64_t i = 0; i < p.n; ++i) {
    double m = -INFINITY;
    for (int64_t j = 0; j < p.v; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < p.d; ++k) acc += static_cast<double>(in.e[i * p.d + k]) * in.c[j * p.d + k];
      z[j] = acc;
      m = std::max(m, acc);
    }
    mean_max_p += std::exp(m - r.lse[i]) / p.n;
    double h = 0.0;
    for (double x : z) {
      double q = std::exp(x - r.lse[i]);
      h -= q > 0 ? q * (x - r.lse[i]) : 0.0;
    }
    mean_entropy += h / p.n;
  }
  RecordProperty("loss", std::to_string(r.loss));
  RecordProperty("mean_entropy", std::to_string(mean_entropy));
  RecordProperty("mean_max_probability", std::to_string(mean_max_p));
  EXPECT_GT(mean_max_p, 0.1);
  EXPECT_LT(mean_max_p, 0.99);  // not one-hot either
  // Targets are drawn from the softmax, so the expected loss is the entropy.
  // The per-token loss has a std of a few nats: over 64 tokens the mean is
  // within ~1 nat of the mean entropy (and a uniform or argmax choice is not).
  EXPECT_NEAR(r.loss, mean_entropy, 1.0);
}

TEST(RealisticData, NeedsTwoChannels) {
  Problem p = make_problem(7, 1, 13);
  EXPECT_THROW(generate(p, DataMode::kRealistic, 1), InputError);
  EXPECT_NO_THROW(generate(p, DataMode::kRandom, 1));
  p.d = 2;
  EXPECT_NO_THROW(generate(p, DataMode::kRealistic, 1));
}

TEST(DataMode, ParseAndPrint) {
  EXPECT_EQ(parse_data_mode("random"), DataMode::kRandom);
  EXPECT_EQ(parse_data_mode("realistic"), DataMode::kRealistic);
  EXPECT_STREQ(to_string(DataMode::kRandom), "random");
  EXPECT_STREQ(to_string(DataMode::kRealistic), "realistic");
  EXPECT_THROW(parse_data_mode("Random"), InputError);
  EXPECT_THROW(parse_data_mode(""), InputError);
}

// --- bf16 -------------------------------------------------------------------------

TEST(Bf16, ExactValues) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16_bits(0.15625f), 0x3E20);  // 1.25 · 2^-3
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(bf16_bits_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0xC000), -2.0f);
  EXPECT_EQ(bf16_bits_to_float(0x7F7F), 0x1.FEp127f);  // largest finite bf16
  EXPECT_EQ(bf16_bits_to_float(0x0080), 0x1p-126f);    // smallest normal
  // Every bf16 value survives the round trip.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float x = bf16_bits_to_float(bits);
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_to_bf16_bits(x), bits) << std::hex << b;
  }
}

TEST(Bf16, TiesToEven) {
  // bf16 keeps 7 fraction bits: around 1 the spacing is 2^-7.
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f), 1.0f);                       // tie, 1.0 is even
  EXPECT_EQ(round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);         // tie, 1+2^-7 is odd: up
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);  // above the tie: up
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f - 0x1p-20f), 1.0f);            // below the tie: down
  EXPECT_EQ(round_bf16(-(1.0f + 0x1p-8f)), -1.0f);
  EXPECT_EQ(round_bf16(-(1.0f + 3 * 0x1p-8f)), -(1.0f + 0x1p-6f));
  // The carry into the exponent: just below 2 rounds to 2.
  EXPECT_EQ(round_bf16(0x1.FFFFFEp0f), 2.0f);
  // Past the largest bf16 by half a step or more: infinity (round to nearest).
  EXPECT_EQ(round_bf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
}

TEST(Bf16, NanStaysNan) {
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(round_bf16(quiet)));
  EXPECT_TRUE(std::isnan(round_bf16(-quiet)));
  // A NaN whose payload sits only in the low 16 bits must not become infinity.
  float low_payload;
  const uint32_t bits = 0x7F800001u;
  std::memcpy(&low_payload, &bits, 4);
  ASSERT_TRUE(std::isnan(low_payload));
  EXPECT_TRUE(std::isnan(round_bf16(low_payload)));
  const uint32_t neg_bits = 0xFF800001u;
  std::memcpy(&low_payload, &neg_bits, 4);
  EXPECT_TRUE(std::isnan(round_bf16(low_payload)));
}

TEST(Bf16, RoundsToNearestWithinHalfAStep) {
  // For normal values: at most half a bf16 step from x, and no neighbouring bf16 value is closer.
  std::mt19937_64 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-100, 100);
  std::vector<float> values;
  for (int i = 0; i < 100000; ++i) values.push_back(std::ldexp(normal(rng), exponent(rng)));
  std::vector<float> rounded = values;
  round_to_bf16(rounded);
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = values[i], r = rounded[i];
    ASSERT_EQ(r, round_bf16(x));
    // bf16 has 8 significant bits: for |x| in [2^(e−1), 2^e) the spacing is
    // 2^(e−8), so the error is at most half of it, 2^(e−9) ≤ 2^-8·|x|.
    int e = 0;
    std::frexp(x, &e);
    const double err = std::fabs(static_cast<double>(r) - x);
    ASSERT_LE(err, std::ldexp(1.0, e - 9)) << x;
    ASSERT_LE(err, 0x1p-8 * std::fabs(x)) << x;
    const uint16_t b = float_to_bf16_bits(x);
    for (uint16_t neighbour : {static_cast<uint16_t>(b - 1), static_cast<uint16_t>(b + 1)}) {
      const double other = bf16_bits_to_float(neighbour);
      if (std::isfinite(other)) {
        ASSERT_GE(std::fabs(other - x), std::fabs(static_cast<double>(r) - x)) << x;
      }
    }
  }
}

// --- validation ---------------------------------------------------------------------

TEST(ValidateInputs, RejectsOutOfRangeTargetsNamingThePosition) {
  Problem p = make_problem(7, 5, 13);
  HostInputs in = generate(p, DataMode::kRandom, 3);
  EXPECT_NO_THROW(validate_inputs(p, in));
  for (int64_t bad : {int64_t{13}, int64_t{-1}, int64_t{1} << 40}) {
    HostInputs copy = in;
    copy.targets[4] = bad;
    try {
      validate_inputs(p, copy);
      ADD_FAILURE() << "target " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("position 4"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  // The ignore index itself is fine; V−1 and 0 are fine.
  in.targets[0] = p.ignore_index;
  in.targets[1] = 12;
  in.targets[2] = 0;
  EXPECT_NO_THROW(validate_inputs(p, in));
}

TEST(ValidateInputs, RejectsWrongSizesAndBadProblems) {
  Problem p = make_problem(7, 5, 13);
  HostInputs in = generate(p, DataMode::kRandom, 4);
  HostInputs bad = in;
  bad.e.pop_back();
  EXPECT_THROW(validate_inputs(p, bad), InputError);
  bad = in;
  bad.c.push_back(0.0f);
  EXPECT_THROW(validate_inputs(p, bad), InputError);
  bad = in;
  bad.targets.pop_back();
  EXPECT_THROW(validate_inputs(p, bad), InputError);
  Problem q = p;
  q.ignore_index = 3;  // a vocabulary entry
  EXPECT_THROW(validate_inputs(q, in), InputError);
  q = p;
  q.softcap = -1.0f;
  EXPECT_THROW(validate_inputs(q, in), InputError);
}

TEST(CountValidTargets, CountsAllButTheIgnoreIndex) {
  Problem p = make_problem(6, 1, 10);
  p.ignore_index = -5;
  EXPECT_EQ(count_valid_targets(p, {0, -5, 9, -100, -5, 3}), 4);  // -100 is not this problem's ignore index
  EXPECT_EQ(count_valid_targets(p, {}), 0);
}

}  // namespace
}  // namespace cce
