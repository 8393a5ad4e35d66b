// Session 22 probe (not in git): the host's own time in stage 10's planning, at lm32k's and gpt2's shapes.
#include <array>
#include <algorithm>
#include <chrono>
#include <vector>
#include <cstdio>
#include "common/runner.h"
#include "common/host_data.h"
#include "common/radix_sort.cuh"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"
using namespace cce;
using clk = std::chrono::steady_clock;
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}
// GPU time of the call when the host has queued its launches (up to its first wait) behind a 3 ms spin.
double prequeued_ms(StageRunner& runner, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    runner.synchronize();
    spin_kernel<<<1, 1>>>(3000000ull);
    cudaEventRecord(a, nullptr);
    runner.forward_backward();
    cudaEventRecord(b, nullptr);
    cudaEventSynchronize(b);
    float ms = 0; cudaEventElapsedTime(&ms, a, b); t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
template <class F> double us_per(F f, int reps = 2000) {
  f();
  auto t0 = clk::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double, std::micro>(clk::now() - t0).count() / reps;
}
int main() {
  for (auto shape : {std::array<int64_t, 3>{8192, 768, 32000}, std::array<int64_t, 3>{20480, 768, 50257}}) {
    Problem p; p.n = shape[0]; p.d = shape[1]; p.v = shape[2];
    s10::PlanPerBatchStage stage;
    GeneratorOptions gen;
    HostInputs inputs = generate_inputs(p, gen);
    StageRunner runner(stage, p, inputs, default_upstream(p, 1234));
    for (int i = 0; i < 5; ++i) runner.forward_backward();
    runner.synchronize();
    volatile size_t sink = 0;
    const double plan_for = us_per([&] { sink += stage.plan_for(p).work_bytes; });
    const double fplan = us_per([&] { sink += s09::forward_plan(stage.plan_for(p)).work_bytes; });
    const double fitems = us_per([&] { sink += s08::sorted_forward_items(p, s09::forward_plan(stage.plan_for(p))).size(); });
    const double ws = us_per([&] { sink += stage.workspace(p, true).size(); });
    const double sortq = us_per([&] { sink += radix_sort_pairs_temp_bytes<float>(p.v, true); });
    Scratch s; s.allocate(s08::sorted_forward_items(p, s09::forward_plan(stage.plan_for(p))));
    const auto items = s08::sorted_forward_items(p, s09::forward_plan(stage.plan_for(p)));
    const double alloc_same = us_per([&] { s.allocate(items); });
    const double lookups = us_per([&] { sink += reinterpret_cast<size_t>(s08::sorted_forward_buffers(s).work); });
    // The whole call: host time to return (it waits inside for its read-backs) and the GPU's, 20 calls.
    double host = 0, host_min = 1e9;
    for (int i = 0; i < 20; ++i) {
      runner.synchronize();
      auto t0 = clk::now();
      runner.forward_backward();
      double t = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
      host += t / 20; host_min = std::min(host_min, t);
      runner.synchronize();
    }
    const double gpu = runner.time_forward_backward_ms(20, 2);
    const double pre = prequeued_ms(runner, 20);
    const double gpu2 = runner.time_forward_backward_ms(20, 2);
    std::printf("N=%lld D=%lld V=%lld: plan_for %.2f us; forward_plan(plan_for) %.2f; sorted_forward_items(...) %.2f; "
                "workspace(p, true) %.2f; cub sort temp query %.2f; Scratch::allocate (same items) %.2f; "
                "sorted_forward_buffers lookups %.2f; call's host return mean %.0f min %.0f us; GPU median %.3f ms, "
                "behind a spin %.3f ms, again %.3f ms\n",
                (long long)p.n, (long long)p.d, (long long)p.v, plan_for, fplan, fitems, ws, sortq, alloc_same, lookups,
                host, host_min, gpu, pre, gpu2);
  }
}
