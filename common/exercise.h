// What a generated exercise (scripts/exercise.py) puts where the solution's
// marked block was: CCE_EXERCISE_MISSING("05_lse_locks", "the lock protocol")
// says that the block is missing, once per file and process. On the device it
// prints and lets the kernel go on (a kernel cannot stop the program; the
// exercise's ctest checks fail on the printed line, FAIL_REGULAR_EXPRESSION in
// cmake/CceStage.cmake); on the host it prints and exits with 1. In a function
// that returns a value, `return CCE_EXERCISE_MISSING(...)` gives a zero value
// of any type, so that the blank exercise compiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace cce {

struct ExerciseMissing {
  template <class T>
  __host__ __device__ operator T() const {
    return T{};
  }
};

namespace exercise_detail {
static __device__ int said_on_device = 0;  // one per file: each file's blocks print once
}  // namespace exercise_detail

static __host__ __device__ inline ExerciseMissing exercise_missing(const char* stage, const char* what) {
#ifdef __CUDA_ARCH__
  if (atomicExch(&exercise_detail::said_on_device, 1) == 0)
    printf("exercise %s: %s is missing (stages/%s/exercise/README.md)\n", stage, what, stage);
#else
  std::fprintf(stderr, "exercise %s: %s is missing (stages/%s/exercise/README.md)\n", stage, what, stage);
  std::exit(1);
#endif
  return ExerciseMissing{};
}

}  // namespace cce

#define CCE_EXERCISE_MISSING(stage, what) ::cce::exercise_missing(stage, what)
