// The espnn_pal_* hooks a host build of the ExecuTorch delegate needs:
// aligned allocation (the heap memory source of src/executorch/) and the log
// sink. host/CMakeLists.txt links this into _et_backend and the native
// delegate checks; on the chip platform_esp_idf.cpp provides them (heap_caps,
// esp_log), in the bundle runner's host shell tests/firmware/stdio_pal.cpp.
//
// The host has one kind of RAM: a preference goes through the same
// fallback-order logic as on a chip without PSRAM (AllocationOrder with
// have_psram = false), so PSRAM_ONLY fails here as it does there, and every
// other preference is one aligned heap block.
#include <stdio.h>
#include <stdlib.h>

#include "espnn/platform.h"

extern "C" {

void* espnn_pal_malloc(size_t bytes, espnn_mem_pref_t pref) {
  espnn::pal::HeapKind order[2];
  if (espnn::pal::AllocationOrder(pref, /*have_psram=*/false, order) == 0) return nullptr;
  void* p = nullptr;
  return posix_memalign(&p, 16, bytes ? bytes : 1) == 0 ? p : nullptr;
}

void espnn_pal_free(void* ptr) { free(ptr); }

void espnn_pal_log_sink(espnn_log_level_t level, const char* text) {
  static const char* const kNames[] = {"", "E", "W", "I", "D"};
  fprintf(stderr, "espnn %s: %s\n", kNames[level <= ESPNN_LOG_DEBUG ? level : ESPNN_LOG_DEBUG], text);
}

}  // extern "C"
