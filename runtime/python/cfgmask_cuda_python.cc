// The Python extension `cfgmask._cuda`: the CUDA logits-masking kernel of
// runtime/cuda_batch.h for tensors that live on a GPU, called by
// HFLogitsProcessor (processors.py) with the tensors' device pointers and
// torch's current stream, so that masking B x V logits is one kernel launch
// after the B x ceil(V / 32) bitmask words are on the device.  Built only
// with CFGMASK_CUDA and CFGMASK_PYTHON_CUDA (docs/gpu.md); the package works
// without it (the processor then expands the bits with torch operations).
// No engine logic here: arguments are checked, a failing Status becomes
// ValueError with the engine's one-line message.
// Tested by tests/gpu/test_hf_device.py.
#include <pybind11/pybind11.h>

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "runtime/cuda_batch.h"
#include "runtime/mask_kernels.h"

namespace py = pybind11;

namespace cfgmask {
namespace {

// Masks B x vocab logits of dtype `dtype` (0 float32, 1 float16, 2 bfloat16)
// at device address `logits` in place from the int32 bitmask at device
// address `bitmask` (B x words_per_row), on `stream` of device `device`.
void ApplyOnDevice(uintptr_t logits, int32_t dtype, int64_t batch, int64_t vocab,
                   uintptr_t bitmask, int64_t words_per_row, uintptr_t stream, int32_t device) {
  if (dtype < 0 || dtype > 2) throw py::value_error("cfgmask: unknown logits dtype code " + std::to_string(dtype));
  if (batch < 0 || vocab < 0 || words_per_row < 0 || batch > INT32_MAX || vocab > INT32_MAX ||
      words_per_row > INT32_MAX) {
    throw py::value_error("cfgmask: bad logits or bitmask shape");
  }
  if (batch > 0 && (logits == 0 || bitmask == 0)) throw py::value_error("cfgmask: null device pointer");
  const cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    throw py::value_error(std::string("cfgmask: cudaSetDevice: ") + cudaGetErrorString(err));
  }
  const Status st = ApplyTokenBitmaskInplaceCuda(
      reinterpret_cast<void*>(logits), static_cast<LogitsDType>(dtype), static_cast<int32_t>(batch),
      static_cast<int32_t>(vocab), reinterpret_cast<const int32_t*>(bitmask),
      static_cast<int32_t>(words_per_row), reinterpret_cast<void*>(stream));
  if (!st.ok()) throw py::value_error(st.message());
}

}  // namespace
}  // namespace cfgmask

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "cfgmask's CUDA logits-masking kernel for device tensors (see cfgmask.processors)";
  m.def("apply_token_bitmask_inplace", &cfgmask::ApplyOnDevice, py::arg("logits"),
        py::arg("dtype"), py::arg("batch"), py::arg("vocab"), py::arg("bitmask"),
        py::arg("words_per_row"), py::arg("stream"), py::arg("device"));
  m.def("device_available", [] {
    std::string why;
    const bool ok = cfgmask::CudaDeviceAvailable(&why);
    return py::make_tuple(ok, why);
  });
}
