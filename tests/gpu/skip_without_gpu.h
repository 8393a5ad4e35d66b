// The GPU tests' first line: without a usable CUDA device the test reports
// SKIPPED with the reason (ctest counts it as skipped), never passes silently.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/device_buffer.h"

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    std::string why;                                                             \
    if (!cce::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)
