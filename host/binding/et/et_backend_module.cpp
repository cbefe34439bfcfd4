// executorch_espnn._et_backend: loads the EspNNBackend delegate into the
// ExecuTorch runtime of the executorch wheel.
//
// Importing this module maps the library, whose static initializer (in
// components/espnn_runtime/src/executorch/espnn_backend.cpp, linked in as an
// object library) registers "EspNNBackend" with libexecutorch.so — the same
// registry executorch.runtime.Runtime uses. The module itself only reports
// what it was built against.
#include <pybind11/pybind11.h>

#include "espnn/executorch_backend.h"

PYBIND11_MODULE(_et_backend, m) {
  m.doc() = "EspNNBackend registered with ExecuTorch's runtime (libexecutorch.so)";
  m.attr("BACKEND_NAME") = espnn::et::kBackendName;
  m.attr("EXECUTORCH_VERSION") = ESPNN_EXECUTORCH_VERSION;
}
