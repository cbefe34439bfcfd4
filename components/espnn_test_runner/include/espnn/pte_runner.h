// The board runner's .pte mode: runs every case of an XTSP .pte suite
// (pte_suite.h) through ExecuTorch's runtime - Program, Method, the portable
// kernels linked into the app, and EspNNBackend for delegated partitions -
// with the same rule as bundle mode: every output is compared with the
// host-computed expected tensor BEFORE anything is timed; only a case that
// verifies is timed (N runs, inputs set before each, outside the timed
// interval) and verified again. One line per case:
//
//   ESPNN_BEGIN v=1 mode=pte platform=<name> cpu_hz=<n|na> cases=<n>
//       suite_bytes=<n> pte_bytes=<n> method=<name>
//   ESPNN_RESULT v=1 mode=pte case=<name> status=pass runs=<n> inputs=<n>
//       outputs=<n> tolerance=exact|atol program=inplace|copy-align
//       planned=<bytes> method_pool=<bytes used> heap_free_min=<bytes|na>
//       cycles_min/mean/max=<n|na> us_min=<n|na> us_mean=<n.nnn|na> us_max=<n|na>
//   ESPNN_RESULT v=1 mode=pte case=<name> status=mismatch stage=verify|after-timing
//       output=<i> element=<j> got=0x<hex> expected=0x<hex> diff_elements=<n> of=<n>
//   ESPNN_RESULT v=1 mode=pte case=<name> status=error stage=<load|method|inputs|
//       execute|outputs> msg=<rest of the line>
//   ESPNN_END v=1 mode=pte cases=<n> passed=<n> failed=<n>
//   ESPNN_SUITE_ERROR v=1 msg=<rest of the line>   (then ESPNN_END ... failed=1)
//
// Built by the result-line rule bundle mode uses too (espnn/result_line.h):
// the error, mismatch and timing fields are spelled the same in both modes.
//
// python/executorch_espnn/pte_suite.py run_suite() runs this core on the
// host through the Python extension (host/binding/et/suite_runner.cpp).
//
// Portable C++ over ExecuTorch's C++ API and espnn::bundle::RunnerPlatform:
// tests/firmware builds and runs it on the host against the executorch
// wheel's libexecutorch.so; on the chip it links the ExecuTorch cross-build
// (docs/firmware.md), cross-built by scripts/build-executorch-esp.sh.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/bundle_runner.h"

namespace espnn {
namespace pte {

struct PteRunnerOptions {
  uint32_t default_runs = 10;        // for cases whose record says 0
  size_t method_pool_bytes = 64 * 1024;  // ExecuTorch's method allocator
  size_t temp_pool_bytes = 16 * 1024;    // temp allocator (kernels, delegates)
};

// Parses the suite at `data`, loads its program and runs every case.
bundle::RunSummary RunSuite(const void* data, size_t size, bundle::RunnerPlatform& platform,
                            const PteRunnerOptions& options);

}  // namespace pte
}  // namespace espnn
