// The upstream gradient (common/upstream.h): ones by default, seeded per token
// on request, or read from a dloss.npy next to loaded inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/cpu/temp_dir.h"
#include "common/check.h"
#include "common/npy.h"
#include "common/runner.h"
#include "common/upstream.h"
#include "tests/cpu/npy_craft.h"

namespace cce {
namespace {

namespace fs = std::filesystem;

// Temp directories named after this test file.
class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("cce_test_upstream") {}
};

Problem problem(Reduction reduction, int64_t n = 7) {
  Problem p;
  p.n = n;
  p.d = 5;
  p.v = 13;
  p.reduction = reduction;
  return p;
}

// The InputError message of `body`, or "" when it throws none.
template <typename F>
std::string input_error(F body) {
  try {
    body();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Upstream, OnesMatchLossBackward) {
  EXPECT_EQ(ones_upstream(problem(Reduction::kMean)), std::vector<float>{1.0f});
  EXPECT_EQ(ones_upstream(problem(Reduction::kSum)), std::vector<float>{1.0f});
  EXPECT_EQ(ones_upstream(problem(Reduction::kNone)), std::vector<float>(7, 1.0f));
}

TEST(Upstream, SeededIsPerTokenForNoneAndDeterministic) {
  const Problem none = problem(Reduction::kNone, 1000);
  const std::vector<float> a = seeded_upstream(none, 3), b = seeded_upstream(none, 3), c = seeded_upstream(none, 4);
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  float lo = 2, hi = 0;
  for (float x : a) lo = std::min(lo, x), hi = std::max(hi, x);
  EXPECT_GE(lo, 0.5f);
  EXPECT_LT(hi, 1.5f);
  EXPECT_LT(lo, 0.6f);  // spread over the range, not a constant
  EXPECT_GT(hi, 1.4f);
  EXPECT_EQ(seeded_upstream(problem(Reduction::kMean), 3), std::vector<float>{1.0f});
  EXPECT_EQ(seeded_upstream(problem(Reduction::kSum), 3), std::vector<float>{1.0f});
}

TEST(Upstream, DefaultUpstreamIsTheSeededOne) {
  // The GPU tests and benchmarks call default_upstream and rely on per-token scaling.
  const Problem none = problem(Reduction::kNone, 50);
  EXPECT_EQ(default_upstream(none, 9), seeded_upstream(none, 9));
}

TEST(Upstream, ChooseOnesByDefault) {
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    const Problem p = problem(r);
    for (const std::string mode : {"", "ones"}) {
      Upstream u = choose_upstream(mode, p, "", 1234);
      EXPECT_EQ(u.values, ones_upstream(p));
      EXPECT_NE(u.description.find("ones"), std::string::npos) << u.description;
    }
  }
  EXPECT_NE(choose_upstream("", problem(Reduction::kNone), "", 1).description.find("loss.sum().backward()"),
            std::string::npos);
}

TEST(Upstream, ChooseRandomIsSeeded) {
  const Problem p = problem(Reduction::kNone);
  Upstream u = choose_upstream("random", p, "", 77);
  EXPECT_EQ(u.values, seeded_upstream(p, 77));
  EXPECT_NE(u.description.find("seeded U(0.5,1.5)"), std::string::npos) << u.description;
  EXPECT_NE(input_error([] { choose_upstream("random", problem(Reduction::kMean), "", 1); }).find("--reduction none"),
            std::string::npos);
  EXPECT_NE(input_error([] { choose_upstream("uniform", problem(Reduction::kNone), "", 1); }).find("ones or random"),
            std::string::npos);
}

TEST(Upstream, ChooseLoadsDlossFromTheLoadDirectory) {
  TempDir dir;
  const Problem none = problem(Reduction::kNone);
  // No dloss.npy: ones, or the seeded values when asked.
  EXPECT_EQ(choose_upstream("", none, dir.str(), 1).values, ones_upstream(none));
  EXPECT_EQ(choose_upstream("random", none, dir.str(), 1).values, seeded_upstream(none, 1));
  const std::vector<float> dloss = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, 1.0f, 7.0f};
  write_upstream(dir.file("dloss.npy"), none, dloss);
  Upstream u = choose_upstream("", none, dir.str(), 1);
  EXPECT_EQ(u.values, dloss);
  EXPECT_NE(u.description.find("loaded from " + dir.file("dloss.npy")), std::string::npos) << u.description;
  // An explicit --upstream beside a dloss.npy is a contradiction.
  EXPECT_NE(input_error([&] { choose_upstream("ones", none, dir.str(), 1); }).find("already gives"), std::string::npos);
}

TEST(Upstream, WriteReadRoundTripShapes) {
  TempDir dir;
  const Problem mean = problem(Reduction::kMean);
  write_upstream(dir.file("mean.npy"), mean, {2.5f});
  NpyArray a = read_npy(dir.file("mean.npy"));
  EXPECT_EQ(a.dtype, "<f4");
  EXPECT_TRUE(a.shape.empty());  // 0-d, like the loss PyTorch returns
  EXPECT_EQ(read_upstream(dir.file("mean.npy"), mean), std::vector<float>{2.5f});
  // [1] is accepted for mean and sum too.
  const float one = 4.0f;
  write_npy(dir.file("one.npy"), &one, {1});
  EXPECT_EQ(read_upstream(dir.file("one.npy"), problem(Reduction::kSum)), std::vector<float>{4.0f});
  const Problem none = problem(Reduction::kNone);
  write_upstream(dir.file("none.npy"), none, ones_upstream(none));
  EXPECT_EQ(read_npy(dir.file("none.npy")).shape, std::vector<int64_t>{7});
  EXPECT_EQ(read_upstream(dir.file("none.npy"), none), ones_upstream(none));
}

TEST(Upstream, ReadRejectsWrongShapeDtypeAndNonFinite) {
  TempDir dir;
  const Problem none = problem(Reduction::kNone), mean = problem(Reduction::kMean);
  const std::vector<float> six(6, 1.0f), seven(7, 1.0f);
  write_npy(dir.file("six.npy"), six.data(), {6});
  EXPECT_NE(input_error([&] { read_upstream(dir.file("six.npy"), none); }).find("expected shape [7]"),
            std::string::npos);
  write_npy(dir.file("seven.npy"), seven.data(), {7});
  EXPECT_NE(input_error([&] { read_upstream(dir.file("seven.npy"), mean); }).find("goes with --reduction none"),
            std::string::npos);
  write_npy(dir.file("matrix.npy"), seven.data(), {7, 1});
  EXPECT_NE(input_error([&] { read_upstream(dir.file("matrix.npy"), none); }).find("expected shape [7]"),
            std::string::npos);
  const float scalar = 1.0f;
  write_npy(dir.file("scalar.npy"), &scalar, {});
  EXPECT_NE(input_error([&] { read_upstream(dir.file("scalar.npy"), none); }).find("goes with --reduction mean or sum"),
            std::string::npos);
  testing::write_file(dir.file("f8.npy"), testing::npy_bytes("<f8", false, "()", testing::raw_bytes(std::vector<double>{1.0})));
  EXPECT_NE(input_error([&] { read_upstream(dir.file("f8.npy"), mean); }).find("expected float32"), std::string::npos);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> values = seven;
    values[4] = bad;
    write_npy(dir.file("bad.npy"), values.data(), {7});
    EXPECT_NE(input_error([&] { read_upstream(dir.file("bad.npy"), none); }).find("at position 4 is not finite"),
              std::string::npos);
  }
  EXPECT_NE(input_error([&] { read_upstream(dir.file("missing.npy"), none); }).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace cce
