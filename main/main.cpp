// Board runner app: finds the test file (data partition, memory-mapped, or
// embedded in the image), maps the Kconfig choices onto the portable runner
// core and lets it print one result line per case on the console.
//   bundle mode: XTSB bundle -> espnn::bundle::RunBundle (ESP-NN runtime)
//   .pte mode:   XTSP suite  -> espnn::pte::RunSuite (ExecuTorch + EspNNBackend)
// Both verify every output before they time anything.
//
// Thin ESP-IDF glue: all logic lives in the runner cores of
// components/espnn_test_runner (bundle*.cpp, pte_suite.cpp, pte_runner.cpp)
// on top of the espnn_runtime component, which tests/firmware builds and
// runs on the host (and, except the ExecuTorch-dependent pte_runner.cpp, on
// an emulated Xtensa core).
//
// On ESP-IDF's `linux` target the app is a Linux process: after the report
// it exits with status 0 if every case passed, 1 otherwise (on a chip,
// app_main returns and the console stays open).
#include <stdio.h>
#include <stdlib.h>

#include "esp_partition.h"
#include "espnn/bundle.h"
#include "espnn/bundle_runner.h"
#include "espnn/platform.h"
#include "espnn/pte_suite.h"
#include "espnn/result_line.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "sdkconfig.h"
#if CONFIG_ESPNN_RUNNER_MODE_PTE
#include "espnn/pte_runner.h"
#endif

#if CONFIG_ESPNN_RUNNER_BUNDLE_EMBEDDED
// EMBED_FILES symbols; ESP-IDF gives them no particular alignment (the
// runner copies models that are not 16-byte aligned).
extern const uint8_t espnn_bundle_start[] asm("_binary_espnn_bundle_bin_start");
extern const uint8_t espnn_bundle_end[] asm("_binary_espnn_bundle_bin_end");
#endif

namespace {

using espnn::bundle::PalPlatformConfig;
using espnn::bundle::RunnerOptions;
using espnn::bundle::WeightPlacement;

// Custom partition type of partitions.csv (0x40..0xFE are free for apps).
constexpr esp_partition_type_t kBundlePartitionType = (esp_partition_type_t)0x40;

// Used where something can go wrong before the runner core starts: finding
// the partition, reserving the bundle-mode pool. (Not in .pte mode with an
// embedded suite, where an unused function would be a warning.)
#if CONFIG_ESPNN_RUNNER_BUNDLE_PARTITION || !CONFIG_ESPNN_RUNNER_MODE_PTE
void BundleError(const char* msg) {
  espnn::bundle::PalRunnerPlatform console{PalPlatformConfig()};
  espnn::bundle::RunSummary rejected;
#if CONFIG_ESPNN_RUNNER_MODE_PTE
  espnn::runner::PteModeReport(console).Rejected(msg, &rejected);
#else
  espnn::runner::BundleModeReport(console).Rejected(msg, &rejected);
#endif
}
#endif

#if CONFIG_ESPNN_RUNNER_BUNDLE_PARTITION
// Bytes of the test file from its header; 0 if it is not the mode's format.
uint32_t PeekSize(const uint8_t* header, size_t n) {
#if CONFIG_ESPNN_RUNNER_MODE_PTE
  return espnn::pte::PeekSuiteSize(header, n);
#else
  return espnn::bundle::PeekBundleSize(header, n);
#endif
}
constexpr size_t kPeekBytes = espnn::pte::kHeaderSize > espnn::bundle::kHeaderSize
                                  ? espnn::pte::kHeaderSize
                                  : espnn::bundle::kHeaderSize;
#endif

// Lets IDLE (task watchdog) and lower-priority tasks run during long suites.
void YieldOneTick() { vTaskDelay(1); }

struct BundleView {
  const uint8_t* data = nullptr;
  size_t size = 0;
#if CONFIG_ESPNN_RUNNER_BUNDLE_PARTITION
  esp_partition_mmap_handle_t handle = 0;
  bool mapped = false;
#endif
};

bool LocateBundle(BundleView* v) {
#if CONFIG_ESPNN_RUNNER_BUNDLE_EMBEDDED
  v->data = espnn_bundle_start;
  v->size = (size_t)(espnn_bundle_end - espnn_bundle_start);
  return true;
#else
  const esp_partition_t* part = esp_partition_find_first(
      kBundlePartitionType, ESP_PARTITION_SUBTYPE_ANY, CONFIG_ESPNN_RUNNER_PARTITION_LABEL);
  if (part == nullptr) {
    BundleError("no partition labelled '" CONFIG_ESPNN_RUNNER_PARTITION_LABEL
                "' of type 0x40 (see partitions.csv)");
    return false;
  }
  // Map only the bundle/suite, not the whole partition (MMU pages are scarce).
  uint8_t header[kPeekBytes];
  if (esp_partition_read(part, 0, header, sizeof(header)) != ESP_OK) {
    BundleError("cannot read the bundle partition");
    return false;
  }
  const uint32_t size = PeekSize(header, sizeof(header));
  if (size == 0) {
    BundleError("the partition holds no XTSB bundle (bundle mode) / XTSP suite (.pte mode); "
                "write one with idf.py -DESPNN_BUNDLE=/abs/path/file bundle-flash");
    return false;
  }
  if (size > part->size) {
    BundleError("the size in the header exceeds the partition");
    return false;
  }
  const void* ptr = nullptr;
  if (esp_partition_mmap(part, 0, size, ESP_PARTITION_MMAP_DATA, &ptr, &v->handle) != ESP_OK) {
    BundleError("esp_partition_mmap of the bundle partition failed");
    return false;
  }
  v->mapped = true;
  v->data = (const uint8_t*)ptr;  // MMU page aligned: models / the .pte run in place
  v->size = size;
  return true;
#endif
}

// Runs the bundle / suite; the number of failed cases (1 if nothing ran).
uint32_t RunAll() {
  BundleView bundle;
  if (!LocateBundle(&bundle)) return 1;

  PalPlatformConfig config;
  config.idle_yield_us = 500000;
  config.yield = YieldOneTick;

#if CONFIG_ESPNN_RUNNER_MODE_PTE
  // ExecuTorch's pools and the planned buffers come from espnn_pal_malloc.
#if CONFIG_ESPNN_RUNNER_PTE_POOLS_PSRAM
  config.activations = ESPNN_MEM_PSRAM_FIRST;
#else
  config.activations = ESPNN_MEM_INTERNAL_FIRST;
#endif
  config.weights = config.activations;  // an unaligned embedded .pte is copied there
  espnn::pte::PteRunnerOptions options;
  options.default_runs = CONFIG_ESPNN_RUNNER_DEFAULT_RUNS;
  options.method_pool_bytes = (size_t)CONFIG_ESPNN_RUNNER_METHOD_POOL_KB * 1024u;
  options.temp_pool_bytes = (size_t)CONFIG_ESPNN_RUNNER_TEMP_POOL_KB * 1024u;
  espnn::bundle::PalRunnerPlatform platform(config);
  const espnn::bundle::RunSummary summary =
      espnn::pte::RunSuite(bundle.data, bundle.size, platform, options);
#else
#if CONFIG_ESPNN_MEMORY_PSRAM_FIRST
  config.activations = ESPNN_MEM_PSRAM_FIRST;
#else
  config.activations = ESPNN_MEM_INTERNAL_FIRST;
#endif
#if CONFIG_ESPNN_WEIGHTS_COPY_PSRAM
  config.weights = ESPNN_MEM_PSRAM_FIRST;
#else
  config.weights = ESPNN_MEM_INTERNAL_FIRST;
#endif

  void* pool = nullptr;
#if CONFIG_ESPNN_MEMORY_RUNTIME_ALLOCATOR
  // Reserved once, as ExecuTorch's method pool would be.
  const size_t pool_bytes = (size_t)CONFIG_ESPNN_RUNNER_POOL_KB * 1024u;
#if CONFIG_ESPNN_RUNNER_POOL_PSRAM
  pool = espnn_pal_malloc(pool_bytes, ESPNN_MEM_PSRAM_ONLY);
#else
  pool = espnn_pal_malloc(pool_bytes, ESPNN_MEM_INTERNAL_FIRST);
#endif
  if (pool == nullptr) {
    BundleError("cannot reserve the arena pool (lower ESPNN_RUNNER_POOL_KB)");
    return 1;
  }
  config.pool = pool;
  config.pool_bytes = pool_bytes;
#endif

  RunnerOptions options;
  options.default_runs = CONFIG_ESPNN_RUNNER_DEFAULT_RUNS;
#if CONFIG_ESPNN_WEIGHTS_IN_PLACE
  options.weights = WeightPlacement::kInPlace;
#else
  options.weights = WeightPlacement::kCopy;
#endif

  espnn::bundle::PalRunnerPlatform platform(config);
  const espnn::bundle::RunSummary summary =
      espnn::bundle::RunBundle(bundle.data, bundle.size, platform, options);
  espnn_pal_free(pool);
#endif

#if CONFIG_ESPNN_RUNNER_BUNDLE_PARTITION
  if (bundle.mapped) esp_partition_munmap(bundle.handle);
#endif
  return summary.failed;
}

}  // namespace

extern "C" void app_main(void) {
  espnn_pal_init();
  const uint32_t failed = RunAll();
#if CONFIG_IDF_TARGET_LINUX
  fflush(stdout);
  exit(failed == 0 ? 0 : 1);
#else
  (void)failed;
#endif
}
