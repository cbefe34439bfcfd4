// executorch_espnn._et_backend: loads the EspNNBackend delegate into the
// ExecuTorch runtime of the executorch wheel.
//
// Importing this module maps the library, whose static initializer (in
// components/espnn_runtime/src/executorch/espnn_backend.cpp, linked in as an
// object library) registers "EspNNBackend" with libexecutorch.so — the same
// registry executorch.runtime.Runtime uses. The module reports what it was
// built against and runs .pte suites with the board runner's core
// (suite_runner.cpp).
#include <pybind11/pybind11.h>

#include "espnn/executorch_backend.h"

void bind_suite_runner(pybind11::module_& m);  // suite_runner.cpp

PYBIND11_MODULE(_et_backend, m) {
  m.doc() = "EspNNBackend registered with ExecuTorch's runtime (libexecutorch.so)";
  m.attr("BACKEND_NAME") = espnn::et::kBackendName;
  m.attr("EXECUTORCH_VERSION") = ESPNN_EXECUTORCH_VERSION;
  bind_suite_runner(m);
}
