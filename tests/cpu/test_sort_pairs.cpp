// common/sort_pairs.h's host side: the key widths it refuses, and an empty
// sort that touches nothing. Both are decided before any CUDA call, so they
// run without a GPU; the sort itself is tested against std::stable_sort in
// tests/gpu/test_sort_pairs.cu.
#include <gtest/gtest.h>

#include <string>

#include "common/check.h"
#include "common/sort_pairs.h"

namespace cce {
namespace {

TEST(SortPairs, RefusesKeyBitsOutsideOneTo31) {
  // The refusal itself, not a failed launch on the null buffers that would follow it.
  for (const int bits : {-1, 0, 32, 64}) {
    std::string message;
    try {
      sort_int_pairs(nullptr, 0, nullptr, nullptr, nullptr, nullptr, 4, bits, nullptr);
    } catch (const CudaError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("bits must be 1..31, got " + std::to_string(bits)), std::string::npos)
        << "bits " << bits << ": " << message;
  }
}

TEST(SortPairs, NoPairsIsNothingToDo) {
  // Null buffers and no GPU here: a sort that read them or launched a kernel would throw.
  EXPECT_NO_THROW(sort_int_pairs(nullptr, 0, nullptr, nullptr, nullptr, nullptr, 0, 8, nullptr));
}

}  // namespace
}  // namespace cce
