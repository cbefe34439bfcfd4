// espnn_pal_* for ESP-IDF (v5.1+): esp_timer, the CPU cycle counter,
// heap_caps with a fallback order, esp_log, the console.
//
// Thin glue by design: every decision that does not need the hardware
// (wrap-around, fallback order, log filtering) lives in platform_common.cpp,
// which is tested on the host and on an emulated Xtensa core.
//
// ESP-IDF's `linux` target (the app as a Linux process, docs/firmware.md)
// has heap_caps (on malloc) and esp_log, but no esp_cpu.h, no clock tree, no
// CPU clock setting, and esp_timer only as headers (ESP-IDF 5.5): there the
// clock is CLOCK_MONOTONIC and the cycle counter is absent (the capability
// bit says so; the runner then reports time only).
#include <stdio.h>
#include <stdlib.h>

#include "esp_heap_caps.h"
#include "esp_log.h"
#include "sdkconfig.h"

#if CONFIG_IDF_TARGET_LINUX
#include <time.h>
#else
#include "esp_cpu.h"
#include "esp_timer.h"
#if defined(__has_include)
#if __has_include("esp_clk_tree.h")
#include "esp_clk_tree.h"
#define ESPNN_HAVE_CLK_TREE 1
#endif
#endif
#endif

#include "espnn/platform.h"

namespace {

const char* const kTag = "espnn";

bool HavePsram() {
#if CONFIG_SPIRAM
  return heap_caps_get_total_size(MALLOC_CAP_SPIRAM) > 0;
#else
  return false;
#endif
}

uint32_t CapsFor(espnn::pal::HeapKind kind) {
  return kind == espnn::pal::HeapKind::kPsram ? (MALLOC_CAP_SPIRAM | MALLOC_CAP_8BIT)
                                              : (MALLOC_CAP_INTERNAL | MALLOC_CAP_8BIT);
}

}  // namespace

extern "C" {

void espnn_pal_init(void) {}

uint32_t espnn_pal_caps(void) {
#if CONFIG_IDF_TARGET_LINUX
  // heap_caps on linux is malloc: no meaningful low-water mark.
  return ESPNN_PAL_CAP_TIME;
#else
  return ESPNN_PAL_CAP_CYCLES | ESPNN_PAL_CAP_TIME | ESPNN_PAL_CAP_HEAP_STATS |
         (HavePsram() ? ESPNN_PAL_CAP_PSRAM : 0u);
#endif
}

const char* espnn_pal_name(void) { return CONFIG_IDF_TARGET; }

#if CONFIG_IDF_TARGET_LINUX
uint64_t espnn_pal_time_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint32_t espnn_pal_cycle_count(void) { return 0; }

uint32_t espnn_pal_cpu_hz(void) { return 0; }
#else
uint64_t espnn_pal_time_us(void) { return (uint64_t)esp_timer_get_time(); }

uint32_t espnn_pal_cycle_count(void) { return (uint32_t)esp_cpu_get_cycle_count(); }

uint32_t espnn_pal_cpu_hz(void) {
#if defined(ESPNN_HAVE_CLK_TREE)
  uint32_t hz = 0;
  if (esp_clk_tree_src_get_freq_hz(SOC_MOD_CLK_CPU, ESP_CLK_TREE_SRC_FREQ_PRECISION_CACHED, &hz) ==
          ESP_OK &&
      hz != 0)
    return hz;
#endif
  return (uint32_t)CONFIG_ESP_DEFAULT_CPU_FREQ_MHZ * 1000000u;
}
#endif

void* espnn_pal_malloc(size_t bytes, espnn_mem_pref_t pref) {
  espnn::pal::HeapKind order[2];
  const uint32_t n = espnn::pal::AllocationOrder(pref, HavePsram(), order);
  for (uint32_t i = 0; i < n; ++i) {
    void* p = heap_caps_aligned_alloc(16, bytes ? bytes : 1, CapsFor(order[i]));
    if (p != nullptr) return p;
  }
  return nullptr;
}

// heap_caps_free releases heap_caps_aligned_alloc blocks too (ESP-IDF 5.x).
void espnn_pal_free(void* ptr) { heap_caps_free(ptr); }

size_t espnn_pal_heap_min_free(void) { return heap_caps_get_minimum_free_size(MALLOC_CAP_8BIT); }

void espnn_pal_write(const char* text, size_t n) {
  fwrite(text, 1, n, stdout);
  if (n > 0 && text[n - 1] == '\n') fflush(stdout);
}

void espnn_pal_log_sink(espnn_log_level_t level, const char* text) {
  switch (level) {
    case ESPNN_LOG_ERROR:
      ESP_LOGE(kTag, "%s", text);
      break;
    case ESPNN_LOG_WARN:
      ESP_LOGW(kTag, "%s", text);
      break;
    case ESPNN_LOG_INFO:
      ESP_LOGI(kTag, "%s", text);
      break;
    default:
      ESP_LOGD(kTag, "%s", text);
      break;
  }
}

void espnn_pal_abort(void) { abort(); }

}  // extern "C"
