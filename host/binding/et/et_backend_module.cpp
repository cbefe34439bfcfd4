// executorch_espnn._et_backend: loads the EspNNBackend delegate into the
// ExecuTorch runtime of the executorch wheel.
//
// Importing this module maps the library, whose static initializer (in
// components/espnn_runtime/src/executorch/espnn_backend.cpp, linked in as an
// object library) registers "EspNNBackend" with libexecutorch.so — the same
// registry executorch.runtime.Runtime uses. The module reports what it was
// built against, which operator-library kernels (espnn::*.out, from
// src/executorch/espnn_oplib_kernels.cpp) it registered, and runs .pte suites with the board runner's core
// (suite_runner.cpp).
#include <pybind11/pybind11.h>

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "espnn/executorch_backend.h"
#include "espnn/oplib_ops.h"

namespace espnn {
namespace et {
bool OplibKernelsRegistered();  // components/espnn_runtime/src/executorch/espnn_oplib_kernels.cpp
}  // namespace et
}  // namespace espnn

void bind_suite_runner(pybind11::module_& m);  // suite_runner.cpp

PYBIND11_MODULE(_et_backend, m) {
  m.doc() = "EspNNBackend registered with ExecuTorch's runtime (libexecutorch.so)";
  m.attr("BACKEND_NAME") = espnn::et::kBackendName;
  m.attr("EXECUTORCH_VERSION") = ESPNN_EXECUTORCH_VERSION;
  // The operator-library kernels this library registered (empty if ExecuTorch refused them).
  std::vector<std::string> kernels;
  if (espnn::et::OplibKernelsRegistered()) {
#define ESPNN_X(name, opcode, activations, zero_points) kernels.push_back("espnn::" #name ".out");
    ESPNN_OPLIB_OPS(ESPNN_X)
#undef ESPNN_X
  }
  m.attr("OPLIB_KERNELS") = kernels;
  bind_suite_runner(m);
}
