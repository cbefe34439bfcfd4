// ExecuTorch's platform hooks (et_pal_*) implemented on the espnn_pal_*
// layer. ExecuTorch declares these weak and ships defaults; an application
// that links this file gets ESP-IDF clocks, logging and heap_caps memory in
// ExecuTorch. The component compiles this file only when
// CONFIG_ESPNN_PAL_EXECUTORCH is enabled, so an application that brings its
// own PAL (another runner's et_pal_* definitions) disables the option and
// gets no duplicate strong symbols. Nothing else in the component defines an
// et_pal_* symbol; its own hooks are all named espnn_pal_*.
//
// The file itself is portable (it only calls espnn_pal_*): the tests compile
// it on the host and on the emulated Xtensa core. It includes ExecuTorch's
// header when that is on the include path, so the definitions are checked
// against it; otherwise it declares the same C signatures itself (ExecuTorch
// runtime/platform/platform.h: et_timestamp_t is uint64_t, the log level an
// enum of ASCII letters).
#if defined(ESP_PLATFORM)
#include "sdkconfig.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "espnn/platform.h"

#if defined(__has_include)
#if __has_include(<executorch/runtime/platform/platform.h>)
#include <executorch/runtime/platform/platform.h>
#define ESPNN_HAVE_EXECUTORCH_PAL_HEADER 1
#endif
#endif

#ifndef ESPNN_HAVE_EXECUTORCH_PAL_HEADER
extern "C" {
typedef uint64_t et_timestamp_t;
typedef struct {
  uint64_t numerator;
  uint64_t denominator;
} et_tick_ratio_t;
typedef enum {
  kDebug = 'D',
  kInfo = 'I',
  kError = 'E',
  kFatal = 'F',
  kUnknown = '?',
} et_pal_log_level_t;
void et_pal_init(void);
__attribute__((noreturn)) void et_pal_abort(void);
et_timestamp_t et_pal_current_ticks(void);
et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void);
void et_pal_emit_log_message(et_timestamp_t timestamp, et_pal_log_level_t level,
                             const char* filename, const char* function, size_t line,
                             const char* message, size_t length);
}
#endif

// Declared by newer ExecuTorch releases only; defining them is harmless for
// older ones (nothing calls them there).
extern "C" void* et_pal_allocate(size_t size);
extern "C" void et_pal_free(void* ptr);

namespace {

// Memory ExecuTorch asks the PAL for (et_pal_allocate): the same preference
// as the delegate's own buffers.
espnn_mem_pref_t EtMemoryPreference() {
#if defined(CONFIG_ESPNN_MEMORY_PSRAM_FIRST)
  return ESPNN_MEM_PSRAM_FIRST;
#else
  return ESPNN_MEM_INTERNAL_FIRST;
#endif
}

espnn_log_level_t FromEtLevel(et_pal_log_level_t level) {
  switch (level) {
    case kDebug:
      return ESPNN_LOG_DEBUG;
    case kInfo:
      return ESPNN_LOG_INFO;
    case kError:
    case kFatal:
      return ESPNN_LOG_ERROR;
    default:
      return ESPNN_LOG_WARN;
  }
}

const char* BaseName(const char* path) {
  if (path == nullptr) return "?";
  const char* base = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/' || *p == '\\') base = p + 1;
  return base;
}

}  // namespace

extern "C" {

void et_pal_init(void) { espnn_pal_init(); }

void et_pal_abort(void) { espnn_pal_abort(); }

// Microseconds from the 64-bit clock (esp_timer on the chip): monotonic and
// free of the 32-bit cycle counter's wrap-around and of per-core counters.
et_timestamp_t et_pal_current_ticks(void) { return espnn_pal_time_us(); }

et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void) {
  et_tick_ratio_t r;
  r.numerator = 1000;
  r.denominator = 1;
  return r;
}

void et_pal_emit_log_message(et_timestamp_t timestamp, et_pal_log_level_t level,
                             const char* filename, const char* function, size_t line,
                             const char* message, size_t length) {
  (void)timestamp;
  (void)function;
  const espnn_log_level_t l = FromEtLevel(level);
  if (!espnn::pal::LogEnabled(l, espnn::pal::ConfiguredLogLevel())) return;
  const int n = length > 160 ? 160 : (int)length;
  espnn_pal_log(l, "[et %s:%u] %.*s", BaseName(filename), (unsigned)line, n,
                message ? message : "");
}

void* et_pal_allocate(size_t size) { return espnn_pal_malloc(size, EtMemoryPreference()); }

void et_pal_free(void* ptr) { espnn_pal_free(ptr); }

}  // extern "C"
