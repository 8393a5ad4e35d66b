#include "common/cublas_handle.h"

#include "common/check.h"
#include "common/device_buffer.h"

namespace cce {
namespace {
struct CublasState {
  cublasHandle_t handle = nullptr;
  DeviceBuffer<uint8_t> workspace;
  CublasState() {
    CCE_CUBLAS_CHECK(cublasCreate(&handle));
    workspace = DeviceBuffer<uint8_t>(kCublasWorkspaceBytes);
    CCE_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace.get(), workspace.bytes()));
    CCE_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  }
  ~CublasState() {
    if (handle) cublasDestroy(handle);
  }
};
CublasState* g_state = nullptr;
}  // namespace

cublasHandle_t cublas_handle() {
  // Leaked on purpose: destroying a handle after the CUDA runtime has shut down
  // at exit is not allowed.
  if (!g_state) g_state = new CublasState();
  return g_state->handle;
}

bool cublas_handle_created() { return g_state != nullptr; }

}  // namespace cce
