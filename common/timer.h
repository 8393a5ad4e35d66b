// Timing with CUDA events: warm-up runs first, then the median of timed runs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "common/check.h"

namespace cce {

class CudaEventTimer {
 public:
  CudaEventTimer() {
    CCE_CUDA_CHECK(cudaEventCreate(&start_));
    CCE_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CudaEventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;

  void start(cudaStream_t stream = nullptr) { CCE_CUDA_CHECK(cudaEventRecord(start_, stream)); }
  // Milliseconds since start(), after the stream reaches this point.
  float stop(cudaStream_t stream = nullptr) {
    CCE_CUDA_CHECK(cudaEventRecord(stop_, stream));
    CCE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    CCE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Runs `work` `warmup` times untimed, then `iters` times timed; returns the median ms.
inline double time_median_ms(const std::function<void()>& work, int iters, int warmup = 2,
                             cudaStream_t stream = nullptr) {
  for (int i = 0; i < warmup; ++i) work();
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  CudaEventTimer timer;
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    timer.start(stream);
    work();
    times.push_back(timer.stop(stream));
  }
  return median(times);
}

}  // namespace cce
