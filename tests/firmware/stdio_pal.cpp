// espnn_pal_* for the two places where the firmware's portable code is
// tested without ESP-IDF: the host (x86-64, optionally -m32) and the
// xtensa-sim emulator (QEMU, Xtensa lx106, semihosted stdio).
//
// Host: CLOCK_MONOTONIC for time, no cycle counter. xtensa-sim: the core's
// CCOUNT register as the cycle counter (under QEMU it follows QEMU's virtual
// clock, so the numbers are not cycle counts of anything; it only exercises
// the code path), no wall clock. Neither reports heap statistics.
//
// For the tests, allocations can be capped (espnn_test_set_alloc_limit) to
// exercise out-of-memory paths, and the last log message is kept.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__XTENSA__)
#include <time.h>
#endif

#include "espnn/platform.h"
#include "stdio_pal.h"

namespace {

size_t g_alloc_limit = (size_t)-1;  // bytes that may be live at once
uint32_t g_caps_mask = 0xFFFFFFFFu;
size_t g_alloc_live = 0;
espnn_mem_pref_t g_last_pref = ESPNN_MEM_INTERNAL_FIRST;
char g_last_log[256] = "";
espnn_log_level_t g_last_log_level = ESPNN_LOG_NONE;

// Header stored in front of each block: where malloc's block starts and how
// many bytes the caller asked for (for the live-bytes cap).
struct BlockHeader {
  void* raw;
  size_t bytes;
};

}  // namespace

extern "C" {

void espnn_test_set_alloc_limit(size_t bytes) { g_alloc_limit = bytes; }
void espnn_test_mask_caps(uint32_t mask) { g_caps_mask = mask; }
espnn_mem_pref_t espnn_test_last_pref(void) { return g_last_pref; }
const char* espnn_test_last_log(void) { return g_last_log; }
espnn_log_level_t espnn_test_last_log_level(void) { return g_last_log_level; }

void espnn_pal_init(void) {}

uint32_t espnn_pal_caps(void) {
#if defined(__XTENSA__)
  return ESPNN_PAL_CAP_CYCLES & g_caps_mask;
#else
  return ESPNN_PAL_CAP_TIME & g_caps_mask;
#endif
}

const char* espnn_pal_name(void) {
#if defined(__XTENSA__)
  return "xtensa-sim";
#else
  return "host";
#endif
}

uint64_t espnn_pal_time_us(void) {
#if defined(__XTENSA__)
  return 0;
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
#endif
}

uint32_t espnn_pal_cycle_count(void) {
#if defined(__XTENSA__)
  uint32_t v;
  __asm__ volatile("rsr.ccount %0" : "=a"(v));
  return v;
#else
  return 0;
#endif
}

uint32_t espnn_pal_cpu_hz(void) { return 0; }

void* espnn_pal_malloc(size_t bytes, espnn_mem_pref_t pref) {
  g_last_pref = pref;
  if (bytes > g_alloc_limit || g_alloc_live > g_alloc_limit - bytes) return nullptr;
  const size_t extra = 16 + sizeof(BlockHeader);
  if (bytes > (size_t)-1 - extra) return nullptr;
  void* raw = malloc(bytes + extra);
  if (raw == nullptr) return nullptr;
  uintptr_t user = ((uintptr_t)raw + sizeof(BlockHeader) + 15u) & ~(uintptr_t)15u;
  BlockHeader h = {raw, bytes};
  memcpy((void*)(user - sizeof(BlockHeader)), &h, sizeof(h));
  g_alloc_live += bytes;
  return (void*)user;
}

void espnn_pal_free(void* ptr) {
  if (ptr == nullptr) return;
  BlockHeader h;
  memcpy(&h, (const void*)((uintptr_t)ptr - sizeof(BlockHeader)), sizeof(h));
  g_alloc_live -= h.bytes;
  free(h.raw);
}

size_t espnn_pal_heap_min_free(void) { return 0; }

void espnn_pal_write(const char* text, size_t n) {
  fwrite(text, 1, n, stdout);
  if (n > 0 && text[n - 1] == '\n') fflush(stdout);
}

void espnn_pal_log_sink(espnn_log_level_t level, const char* text) {
  g_last_log_level = level;
  snprintf(g_last_log, sizeof(g_last_log), "%s", text);
  fprintf(stderr, "espnn[%d]: %s\n", (int)level, text);
}

void espnn_pal_abort(void) { abort(); }

}  // extern "C"
