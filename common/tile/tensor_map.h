// Tensor maps for Hopper's bulk tensor copies (TMA), made on the host.
//
// A tensor map describes a 2D bf16 matrix in device memory (rows × cols,
// row-major, cols contiguous) and the box one copy moves: box_rows rows × 64
// columns (128 bytes, one swizzle row), written to shared memory in the
// 128-byte swizzle that wgmma reads (wgmma.cuh). Boxes reaching past the
// matrix are zero-filled, so tiles at the edges of N, V and D need no masking
// of the loads. The encoder is the driver's cuTensorMapEncodeTiled, reached
// through the runtime (cudaGetDriverEntryPointByVersion), so that nothing
// links against libcuda and the programs still start on machines without a
// GPU.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace cce {

// Needs cols % 8 == 0 (rows of 16-byte multiples) and a 16-byte aligned base.
// Throws CudaError if the driver refuses the description.
CUtensorMap make_bf16_tensor_map(const void* base, int64_t rows, int64_t cols, int box_rows);

}  // namespace cce
