// Host shell of the board runner's .pte mode: the same RunSuite as main/
// (components/espnn_test_runner/src/pte_runner.cpp) over the stdio PAL, with a file instead of a flash
// partition. Built against the executorch wheel by tests/firmware/pte_host.
//
//   pte_runner [--runs=N] [--misalign=N] [--method-pool=BYTES]
//              [--temp-pool=BYTES] [--alloc-limit=BYTES] [--no-clock] SUITE
//
// Exit status: 0 all cases passed, 1 a case or the suite failed, 2 usage or
// I/O error.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "espnn/bundle_runner.h"
#include "espnn/platform.h"
#include "espnn/pte_runner.h"
#include "stdio_pal.h"
#include "stdio_shell.h"

int main(int argc, char** argv) {
  espnn_pal_init();
  espnn::pte::PteRunnerOptions options;
  options.default_runs = 3;
  uint32_t misalign = 0;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    uint32_t v = 0;
    if (strncmp(a, "--runs=", 7) == 0 && stdio_shell::ParseU32(a + 7, &v)) {
      options.default_runs = v;
    } else if (strncmp(a, "--misalign=", 11) == 0 && stdio_shell::ParseU32(a + 11, &v) && v < 128) {
      misalign = v;
    } else if (strncmp(a, "--method-pool=", 14) == 0 && stdio_shell::ParseU32(a + 14, &v)) {
      options.method_pool_bytes = v;
    } else if (strncmp(a, "--temp-pool=", 12) == 0 && stdio_shell::ParseU32(a + 12, &v)) {
      options.temp_pool_bytes = v;
    } else if (strncmp(a, "--alloc-limit=", 14) == 0 && stdio_shell::ParseU32(a + 14, &v)) {
      espnn_test_set_alloc_limit(v);
    } else if (strcmp(a, "--no-clock") == 0) {
      espnn_test_mask_caps(~(ESPNN_PAL_CAP_CYCLES | ESPNN_PAL_CAP_TIME));
    } else if (a[0] != '-' && path == nullptr) {
      path = a;
    } else {
      fprintf(stderr, "pte_runner: bad argument %s\n", a);
      return 2;
    }
  }
  if (path == nullptr) {
    fprintf(stderr, "usage: pte_runner [--runs=N] [--misalign=N] [--method-pool=B] [--temp-pool=B] "
                    "[--alloc-limit=B] [--no-clock] SUITE\n");
    return 2;
  }
  // 128-byte aligned as a flash mmap is (--misalign imitates an embedded,
  // unaligned suite).
  const stdio_shell::TestFile file("pte_runner", path, 128, misalign);
  if (!file.ok()) return 2;
  espnn::bundle::PalPlatformConfig config;
  espnn::bundle::PalRunnerPlatform platform(config);
  const espnn::bundle::RunSummary sum = espnn::pte::RunSuite(file.data(), file.size(), platform, options);
  return sum.bundle_ok && sum.failed == 0 ? 0 : 1;
}
