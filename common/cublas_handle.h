// One cuBLAS handle per device (made on first use there), with a workspace
// allocated through the allocation tracker (so that cuBLAS's scratch memory
// is counted in every stage's peak memory) and the default math mode: bf16 products accumulate in
// fp32 and fp32 products are not downgraded to TF32.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>

namespace cce {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

cublasHandle_t cublas_handle();  // the current device's, created on first use
// The same handle with its work queued on `stream`, on the tracked workspace.
// Use this, never cublasSetStream alone: cublasSetStream also hands the handle
// back to cuBLAS's own workspace pool (uncounted memory), so the workspace is
// set again after it.
cublasHandle_t cublas_handle_on(cudaStream_t stream);
bool cublas_handle_created();  // on the current device
// cuBLASLt's, for the products that pick their algorithm under constraints
// (stage 10's dC in bf16 rounded once); made with the device's cuBLAS handle.
cublasLtHandle_t cublaslt_handle();

}  // namespace cce
