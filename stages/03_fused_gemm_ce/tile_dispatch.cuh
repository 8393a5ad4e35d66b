// Which tile product a kernel runs, chosen at launch: the fp32 FFMA tiles,
// the bf16 mma.sync tiles (any GPU from sm_80; element loads when D is not a
// multiple of 8), or Hopper's wgmma tiles (sm_90a builds on a 9.0 device).
// Kernels written once as templates over the Tile type are instantiated for
// each path by dispatch_tile_path.
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

#include "common/check.h"
#include "common/problem.h"
#include "stages/03_fused_gemm_ce/tile_product.cuh"
#include "stages/03_fused_gemm_ce/tile_product_wgmma.cuh"

namespace cce {

enum class TilePath { kFp32, kMmaSync, kMmaSyncUnaligned, kWgmma };

inline const char* to_string(TilePath path) {
  switch (path) {
    case TilePath::kFp32: return "fp32 FFMA tiles";
    case TilePath::kMmaSync: return "bf16 mma.sync tiles";
    case TilePath::kMmaSyncUnaligned: return "bf16 mma.sync tiles, element loads (D % 8 != 0)";
    case TilePath::kWgmma: return "bf16 wgmma tiles (sm_90a)";
  }
  return "?";
}

// wgmma needs an sm_90a build and a compute capability 9.0 device; 16-byte
// copies need D to be a multiple of 8.
inline TilePath choose_tile_path(const Problem& p, bool have_device) {
  if (p.dtype == Dtype::kFloat32) return TilePath::kFp32;
  if (p.d % 8 != 0) return TilePath::kMmaSyncUnaligned;
#ifdef CCE_HAVE_WGMMA
  int device = 0, major = 9, minor = 0;  // without a device, plan for an H100
  if (have_device) {
    CCE_CUDA_CHECK(cudaGetDevice(&device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  }
  if (major == 9 && minor == 0) return TilePath::kWgmma;
#else
  (void)have_device;
#endif
  return TilePath::kMmaSync;
}

// Calls f(Tile{}, T{}, aligned constant) for the path.
template <typename F>
void dispatch_tile_path(TilePath path, F&& f) {
  switch (path) {
    case TilePath::kFp32: f(TileProductFp32{}, float{}, std::false_type{}); break;
    case TilePath::kMmaSync: f(TileProductBf16{}, __nv_bfloat16{}, std::true_type{}); break;
    case TilePath::kMmaSyncUnaligned: f(TileProductBf16{}, __nv_bfloat16{}, std::false_type{}); break;
    case TilePath::kWgmma: f(TileProductWgmma{}, __nv_bfloat16{}, std::true_type{}); break;
  }
}

}  // namespace cce
