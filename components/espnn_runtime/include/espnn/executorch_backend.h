// The ExecuTorch delegate of this component: the C++ half of the Python
// class executorch_espnn.EspNNBackend (src/executorch/espnn_backend.cpp).
//
// Linking src/executorch/espnn_backend.cpp registers the backend with
// ExecuTorch from a static initializer; nothing references that object by
// symbol, so a static-archive build must keep it (ESP-IDF: WHOLE_ARCHIVE;
// elsewhere -Wl,--whole-archive or an object library).
//
// Threading rule: ESP-NN keeps its scratch pointers in process-wide globals,
// so at most one Interpreter may run ESP-NN kernels at a time. The delegate
// holds KernelLock for the whole of each execute(); any other code in the
// same process that Invokes an espnn::Interpreter while ExecuTorch may be
// running must hold it too.
#pragma once

namespace espnn {
namespace et {

// The backend id: ExecuTorch looks the delegate up by the Python class name.
constexpr const char kBackendName[] = "EspNNBackend";

// Process-wide lock around ESP-NN use (std::mutex on the host, a FreeRTOS
// mutex on the chip). Blocking; not recursive.
class KernelLock {
 public:
  KernelLock();
  ~KernelLock();
  KernelLock(const KernelLock&) = delete;
  KernelLock& operator=(const KernelLock&) = delete;
};

}  // namespace et
}  // namespace espnn
