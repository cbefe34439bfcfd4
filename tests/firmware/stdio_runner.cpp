// The board runner's shell for the host and for xtensa-sim (QEMU, Xtensa
// lx106): the same portable runner core as main/ (espnn::bundle::RunBundle
// over PalRunnerPlatform), with files instead of a flash partition.
//
//   bundle_runner [OPTIONS] [BUNDLE...]
//     BUNDLE            bundle file; without one, the bundle linked into the
//                       program (xtensa-sim --embed FILE=espnn_test_bundle,
//                       16-byte aligned in ROM, like data in flash). With
//                       several, each run is preceded by "BUNDLE_FILE <path>".
//     --runs=N          timed runs for cases whose record says 0 (default 3)
//     --weights=inplace|copy
//     --pool=BYTES      arena/scratch from one pool ("runtime allocator")
//     --alloc-limit=BYTES  cap on live espnn_pal_malloc bytes (OOM tests)
//     --misalign=N      load the file N bytes past a 16-byte boundary
//     --no-clock        report no cycle counter or clock (timing fields "na";
//                       makes instruction counts exactly repeatable)
//     --selftest        run the platform layer's checks instead
//     --inspect-suite FILE  parse an XTSP .pte suite with the device parser
//                       and print its cases (or SUITE_ERROR msg=...); give
//                       --misalign=N before it to load the file misaligned
//     --hello           run the component's examples/hello app_main instead
//     --unaligned-probe load an int32 from an odd address (on Xtensa this
//                       must trap: the control for the alignment tests)
//     --stack-probe FILE  parse and run the raw XTS3 blob FILE once (inputs
//                       zero) and print "STACK invoke=N persistent=P": N the
//                       deepest stack Interpreter::Invoke used, P the fused
//                       regions' persistent bytes (tests/firmware/test_region_stack.py)
//
// Exit status: 0 all cases passed, 1 a case or the bundle failed, 2 usage or
// I/O error, 3 self-test failure.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "espnn/bundle.h"
#include "espnn/bundle_runner.h"
#include "espnn/container_header.h"
#include "espnn/interpreter.h"
#include "espnn/platform.h"
#include "espnn/pte_suite.h"
#include "stdio_pal.h"
#include "stdio_shell.h"

int RunPlatformSelftest();                // platform_selftest.cpp
extern "C" void app_main(void);           // components/espnn_runtime/examples/hello/main/hello.cpp

extern "C" {
// Present only when the build embedded a bundle (weak: 0 otherwise).
extern const uint8_t espnn_test_bundle[] __attribute__((weak));
extern const uint8_t espnn_test_bundle_end[] __attribute__((weak));
}

namespace {

// A real 32-bit load from `p` (not inlined, so the compiler cannot see the
// misalignment and split it into byte loads).
__attribute__((noinline)) uint32_t Load32(const volatile uint8_t* p) {
  return *(const volatile uint32_t*)p;
}

int UnalignedProbe() {
  alignas(4) static volatile uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  printf("aligned load returned 0x%08lx\n", (unsigned long)Load32(bytes));
  fflush(stdout);
  printf("unaligned load returned 0x%08lx\n", (unsigned long)Load32(bytes + 1));
  return 0;
}

void PrintTensor(const espnn::pte::Tensor& t) {
  printf(" %s[", espnn::pte::DtypeName(t.dtype));
  for (uint32_t d = 0; d < t.rank; ++d) printf(d ? ",%lu" : "%lu", (unsigned long)t.dims[d]);
  printf("]");
  if (t.atol > 0.0f) printf("~%g", (double)t.atol);
}

// The device parser's view of a suite, for comparison with pte_suite.py.
int InspectSuite(const char* path, uint32_t misalign) {
  const stdio_shell::TestFile file("bundle_runner", path, 16, misalign);
  if (!file.ok()) return 2;
  espnn::pte::Suite suite;
  const espnn::Status s = espnn::pte::ParseSuite(file.data(), file.size(), &suite);
  if (!s.ok()) {
    printf("SUITE_ERROR msg=%s\n", s.message());
    return 1;
  }
  printf("SUITE method=%s pte_bytes=%lu pte_crc=%08lx cases=%lu\n", suite.method(),
         (unsigned long)suite.pte_size(),
         (unsigned long)espnn::container::Crc32(suite.pte(), suite.pte_size()),
         (unsigned long)suite.num_cases());
  for (uint32_t i = 0; i < suite.num_cases(); ++i) {
    const espnn::pte::Case c = suite.case_at(i);
    printf("CASE %.*s runs=%lu in", (int)c.name_size, c.name, (unsigned long)c.runs);
    for (uint32_t k = 0; k < c.input_count; ++k) PrintTensor(suite.input(c, k));
    printf(" out");
    for (uint32_t k = 0; k < c.output_count; ++k) PrintTensor(suite.output(c, k));
    printf("\n");
  }
  return 0;
}

// Stack use by painting: fill kProbeDepth bytes below the caller's frame
// with a pattern, run, and find the deepest byte no longer holding it. The
// top kProbeGuard bytes are left alone (the painter's own frame lies there),
// so uses below that are reported as kProbeGuard. Reliable on the host's
// -m32 build and on lx106 (no signal handlers or interrupts run meanwhile);
// a byte the run happened to write with the pattern value makes it read
// a few bytes low at worst.
constexpr uint32_t kProbeDepth = 24 * 1024;  // < xtensa-sim's 64 KiB stack
constexpr uint32_t kProbeGuard = 256;
constexpr uint8_t kPaint = 0xA5;

__attribute__((noinline)) void Paint(uintptr_t top) {
  volatile uint8_t* p = (volatile uint8_t*)(top - kProbeDepth);
  for (uint32_t i = 0; i < kProbeDepth - kProbeGuard; ++i) p[i] = kPaint;
}

__attribute__((noinline)) uint32_t InvokeStackBytes(espnn::Interpreter& it, espnn::Status* s) {
  volatile uint8_t anchor = 0;
  const uintptr_t top = (uintptr_t)&anchor;
  Paint(top);
  *s = it.Invoke();
  const volatile uint8_t* p = (const volatile uint8_t*)(top - kProbeDepth);
  uint32_t untouched = 0;
  while (untouched < kProbeDepth - kProbeGuard && p[untouched] == kPaint) ++untouched;
  return kProbeDepth - untouched;
}

void* Aligned16(void** block, size_t n) {
  *block = malloc(n + 16);
  return *block ? (void*)(((uintptr_t)*block + 15u) & ~(uintptr_t)15u) : nullptr;
}

int StackProbe(const char* path) {
  const stdio_shell::TestFile file("bundle_runner", path, 16, 0);
  if (!file.ok()) return 2;
  espnn::Model model;
  espnn::Status s = espnn::ParseModel(file.data(), file.size(), &model);
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(model);
  void *arena_block = nullptr, *scratch_block = nullptr, *persistent_block = nullptr;
  void* arena = Aligned16(&arena_block, req.arena_bytes);
  void* scratch = Aligned16(&scratch_block, req.scratch_bytes);
  void* persistent = Aligned16(&persistent_block, req.persistent_bytes);
  espnn::Interpreter it;
  if (s.ok())
    s = it.Init(&model, arena, req.arena_bytes, scratch, req.scratch_bytes, persistent,
                req.persistent_bytes);
  uint32_t used = 0;
  void* output_blocks[espnn::xts3::kMaxGraphOutputs] = {};
  if (s.ok()) {
    for (uint32_t i = 0; i < it.num_inputs(); ++i)  // (an EXTERNAL input stays unbound: Invoke says so)
      if (it.input_data(i) != nullptr) memset(it.input_data(i), 0, it.input_info(i).nbytes);
    // EXTERNAL outputs get a buffer each, outside the measured stack.
    for (uint32_t i = 0; i < it.num_outputs() && s.ok(); ++i)
      if (it.output_info(i).flags & espnn::xts3::kTensorFlagExternal)
        s = it.BindOutput(i, Aligned16(&output_blocks[i], it.output_info(i).nbytes),
                          it.output_info(i).nbytes);
    if (s.ok()) used = InvokeStackBytes(it, &s);
  }
  if (s.ok())
    printf("STACK invoke=%lu persistent=%lu\n", (unsigned long)used, (unsigned long)req.persistent_bytes);
  else
    printf("STACK_ERROR msg=%s\n", s.message());
  for (void* block : output_blocks) free(block);
  free(persistent_block);
  free(scratch_block);
  free(arena_block);
  return s.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  espnn_pal_init();
  espnn::bundle::RunnerOptions options;
  options.default_runs = 3;
  espnn::bundle::PalPlatformConfig config;
  uint32_t pool_bytes = 0, misalign = 0;
  int first_path = 0, num_paths = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    uint32_t v = 0;
    if (strncmp(a, "--runs=", 7) == 0 && stdio_shell::ParseU32(a + 7, &v)) {
      options.default_runs = v;
    } else if (strcmp(a, "--weights=inplace") == 0) {
      options.weights = espnn::bundle::WeightPlacement::kInPlace;
    } else if (strcmp(a, "--weights=copy") == 0) {
      options.weights = espnn::bundle::WeightPlacement::kCopy;
    } else if (strncmp(a, "--pool=", 7) == 0 && stdio_shell::ParseU32(a + 7, &v)) {
      pool_bytes = v;
    } else if (strncmp(a, "--alloc-limit=", 14) == 0 && stdio_shell::ParseU32(a + 14, &v)) {
      espnn_test_set_alloc_limit(v);
    } else if (strncmp(a, "--misalign=", 11) == 0 && stdio_shell::ParseU32(a + 11, &v) && v < 4096) {
      misalign = v;
    } else if (strcmp(a, "--no-clock") == 0) {
      espnn_test_mask_caps(~(ESPNN_PAL_CAP_CYCLES | ESPNN_PAL_CAP_TIME));
    } else if (strcmp(a, "--selftest") == 0) {
      return RunPlatformSelftest() == 0 ? 0 : 3;
    } else if (strcmp(a, "--hello") == 0) {
      app_main();
      return 0;
    } else if (strcmp(a, "--unaligned-probe") == 0) {
      return UnalignedProbe();
    } else if (strcmp(a, "--stack-probe") == 0 && i + 1 < argc) {
      return StackProbe(argv[i + 1]);
    } else if (strcmp(a, "--inspect-suite") == 0 && i + 1 < argc) {
      return InspectSuite(argv[i + 1], misalign);  // (--misalign=N must come first)
    } else if (a[0] != '-' && (num_paths == 0 || first_path + num_paths == i)) {
      if (num_paths++ == 0) first_path = i;
    } else {
      fprintf(stderr, "bundle_runner: bad argument %s\n", a);
      return 2;
    }
  }

  // The pool is taken before any bundle memory, as a firmware would reserve
  // it at boot (ExecuTorch's method pool plays this role in .pte mode).
  void* pool = nullptr;
  if (pool_bytes > 0) {
    pool = malloc(pool_bytes);  // deliberately only malloc-aligned: the pool aligns
    if (pool == nullptr) {
      fprintf(stderr, "bundle_runner: cannot allocate a %lu-byte pool\n",
              (unsigned long)pool_bytes);
      return 2;
    }
    config.pool = pool;
    config.pool_bytes = pool_bytes;
  }

  espnn::bundle::PalRunnerPlatform platform(config);
  int rc = 0;
  if (num_paths == 0) {
    if (espnn_test_bundle == nullptr) {
      fprintf(stderr, "usage: bundle_runner [--runs=N] [--weights=inplace|copy] [--pool=BYTES] "
                      "[--alloc-limit=BYTES] [--misalign=N] [--selftest] "
                      "[BUNDLE...]\n");
      free(pool);
      return 2;
    }
    const espnn::bundle::RunSummary sum = espnn::bundle::RunBundle(
        espnn_test_bundle, (size_t)(espnn_test_bundle_end - espnn_test_bundle), platform, options);
    rc = sum.bundle_ok && sum.failed == 0 ? 0 : 1;
  }
  for (int k = 0; k < num_paths; ++k) {
    const char* path = argv[first_path + k];
    const stdio_shell::TestFile file("bundle_runner", path, 16, misalign);
    if (!file.ok()) {
      free(pool);
      return 2;
    }
    if (num_paths > 1) printf("BUNDLE_FILE %s\n", path);
    const espnn::bundle::RunSummary sum =
        espnn::bundle::RunBundle(file.data(), file.size(), platform, options);
    if (!(sum.bundle_ok && sum.failed == 0)) rc = 1;
  }
  free(pool);
  return rc;
}
