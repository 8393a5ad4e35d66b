// gemm_floor: the cuBLAS floor the stages are compared with — one bf16 GEMM
// logits = E·Cᵀ of shape [N,D]×[D,V], timed with CUDA events (median after
// warm-up), with bf16 output (what torch.mm gives) and with fp32 output (what
// stage 01 needs). The product is timed with V rounded up to a multiple of
// --pad (default 128, as cce_bench's floor; C gets zero rows): with V itself
// (--pad 1) an odd V such as GPT-2's 50257 drops cuBLAS off its fast kernels.
// TFLOP/s count the real V.
// Usage: gemm_floor [--n --d --v --iters --pad]
#include <cuda_bf16.h>

#include <cstdio>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/device_buffer.h"
#include "common/driver.h"
#include "common/host_data.h"
#include "common/options.h"
#include "common/timer.h"

namespace {

int gemm_floor(int argc, char** argv) {
  using namespace cce;
  int64_t n = 8192, d = 2304, v = 256000, iters = 20, pad = 128;
  OptionParser parser("gemm_floor");
  add_shape_options(parser, &n, &d, &v);
  parser.add_int("iters", &iters, "timed iterations");
  parser.add_int("pad", &pad, "time the product with V rounded up to a multiple of this (zero rows of C; 1: V itself)");
  if (!parser.parse(argc, argv)) return 0;
  Problem p;
  p.n = n, p.d = d, p.v = v;
  p.validate();
  if (pad < 1 || pad > 4096) throw InputError("--pad must be in [1, 4096], got " + std::to_string(pad));
  if (iters < 1) throw InputError("--iters must be at least 1, got " + std::to_string(iters));
  const int64_t ld = (v + pad - 1) / pad * pad;
  std::string why;
  if (probe_gpu(&why) == GpuState::kBroken) {
    std::fprintf(stderr, "gemm_floor: CUDA error: %s\n", why.c_str());
    return 1;
  }
  if (!cuda_device_available(&why)) {
    std::printf("gemm_floor: SKIPPED: no usable CUDA device (%s)\n", why.c_str());
    return kExitSkipped;
  }
  GeneratorOptions gen;
  gen.mode = DataMode::kRandom;  // random, not zeros: the tensor cores run faster on zeros
  HostInputs in = generate_inputs(p, gen);
  std::vector<uint16_t> e(in.e.size()), c(static_cast<size_t>(ld * d), 0);  // rows past V stay zero
  for (size_t i = 0; i < e.size(); ++i) e[i] = float_to_bf16_bits(in.e[i]);
  for (size_t i = 0; i < in.c.size(); ++i) c[i] = float_to_bf16_bits(in.c[i]);
  DeviceBuffer<uint16_t> de(e.size()), dc(c.size());
  copy_to_device(de.get(), e.data(), e.size() * 2);
  copy_to_device(dc.get(), c.data(), c.size() * 2);
  DeviceBuffer<float> out(static_cast<size_t>(n) * ld);
  const float one = 1.0f, zero = 0.0f;
  for (cudaDataType_t out_type : {CUDA_R_16BF, CUDA_R_32F}) {
    auto gemm = [&] {
      CCE_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(ld),
                                    static_cast<int>(n), static_cast<int>(d), &one, dc.get(), CUDA_R_16BF,
                                    static_cast<int>(d), de.get(), CUDA_R_16BF, static_cast<int>(d), &zero,
                                    out.get(), out_type, static_cast<int>(ld), CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    };
    const double ms = time_median_ms(gemm, static_cast<int>(iters), 3);
    std::printf("cuBLAS bf16 GEMM N=%lld D=%lld V=%lld, %s output (V padded to %lld): %.3f ms, %.1f TFLOP/s\n",
                static_cast<long long>(n), static_cast<long long>(d), static_cast<long long>(v),
                out_type == CUDA_R_16BF ? "bf16" : "fp32", static_cast<long long>(ld), ms,
                2.0 * n * d * v / ms / 1e9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cce::run_program("gemm_floor", [&] { return gemm_floor(argc, argv); });
}
