// The GPU tests' first line: without a CUDA GPU (no driver, no device, or one
// older than sm_80) the test reports SKIPPED with the reason (ctest counts it
// as skipped), never passes silently. A GPU that is there but that CUDA cannot
// use (a driver older than the runtime, any other CUDA error) fails the test:
// skipping would hide a broken machine behind "no GPU".
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/device_buffer.h"

#define SKIP_WITHOUT_GPU()                                                                  \
  do {                                                                                      \
    std::string why;                                                                        \
    const cce::GpuState gpu_state = cce::probe_gpu(&why);                                   \
    if (gpu_state == cce::GpuState::kMissing) GTEST_SKIP() << "no CUDA device: " << why;    \
    if (gpu_state == cce::GpuState::kBroken) FAIL() << "the CUDA GPU is unusable: " << why; \
  } while (0)
