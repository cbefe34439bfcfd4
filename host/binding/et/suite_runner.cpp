// executorch_espnn._et_backend.run_suite: the board runner's .pte mode
// (espnn::pte::RunSuite, components/espnn_test_runner/src/pte_runner.cpp)
// on the host, over the ExecuTorch runtime of the executorch wheel
// (libexecutorch.so, where executorch.runtime registers its CPU kernels and
// this module registers EspNNBackend). The platform is the host's: heap
// blocks, a microsecond clock, no cycle counter, no heap statistics, and the
// result lines go to a Python callable.
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "espnn/pte_runner.h"
#include "espnn/pte_suite.h"

namespace py = pybind11;

namespace {

using espnn::bundle::MemoryUse;

class HostPlatform final : public espnn::bundle::RunnerPlatform {
 public:
  HostPlatform(std::string name, py::function write) : name_(std::move(name)), write_(std::move(write)) {}

  const char* name() const override { return name_.c_str(); }
  void* Alloc(size_t bytes, MemoryUse) override {
    return std::aligned_alloc(16, (bytes + 15) / 16 * 16);
  }
  void Free(void* ptr, MemoryUse) override { std::free(ptr); }
  // The callable's exception is kept and raised once the runner returned:
  // it must not unwind through the runner, which is built without them.
  void WriteLine(const char* line) override {
    if (error_) return;
    try {
      write_(line);
    } catch (py::error_already_set& e) {
      error_ = std::make_unique<py::error_already_set>(std::move(e));
    }
  }
  bool has_time() const override { return true; }
  uint64_t TimeUs() override {
    using namespace std::chrono;
    return (uint64_t)duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
  }
  void RaiseIfWriteFailed() {
    if (error_) throw std::move(*error_);
  }

 private:
  std::string name_;
  py::function write_;
  std::unique_ptr<py::error_already_set> error_;
};

}  // namespace

void bind_suite_runner(py::module_& m) {
  m.def(
      "run_suite",
      [](py::bytes suite, uint32_t default_runs, py::function write, std::string platform,
         size_t method_pool_bytes, size_t temp_pool_bytes, uint32_t misalign) {
        const std::string_view bytes = suite;  // the Python object's buffer, no copy
        // The suite as a flash mmap holds it: 128-byte aligned, so the
        // program is used in place, unless `misalign` moves it off.
        constexpr size_t kAlign = espnn::pte::kPteAlignment;
        std::unique_ptr<uint8_t, decltype(&std::free)> block(
            (uint8_t*)std::aligned_alloc(kAlign, (bytes.size() + misalign + kAlign) / kAlign * kAlign), &std::free);
        if (!block) throw std::bad_alloc();
        uint8_t* data = block.get() + misalign;
        std::memcpy(data, bytes.data(), bytes.size());
        espnn::pte::PteRunnerOptions options;
        options.default_runs = default_runs;
        options.method_pool_bytes = method_pool_bytes;
        options.temp_pool_bytes = temp_pool_bytes;
        HostPlatform host(std::move(platform), std::move(write));
        const espnn::bundle::RunSummary sum = espnn::pte::RunSuite(data, bytes.size(), host, options);
        host.RaiseIfWriteFailed();
        py::dict d;
        d["suite_ok"] = sum.bundle_ok;
        d["cases"] = sum.cases;
        d["passed"] = sum.passed;
        d["failed"] = sum.failed;
        return d;
      },
      py::arg("suite"), py::arg("default_runs"), py::arg("write"), py::arg("platform"),
      py::arg("method_pool_bytes"), py::arg("temp_pool_bytes"), py::arg("misalign") = 0,
      "Runs an XTSP .pte suite with the board runner's C++ core (espnn::pte::RunSuite); each result "
      "line goes to write(line). Returns {suite_ok, cases, passed, failed}.");
}
