// Portable part of the platform layer (see espnn/platform.h): everything
// that can be decided without touching hardware, so that it is compiled and
// tested on the host and on the emulated Xtensa core, not only on a board.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if defined(ESP_PLATFORM)
#include "sdkconfig.h"  // CONFIG_ESPNN_LOG_LEVEL
#endif
#include "espnn/platform.h"

namespace espnn {
namespace pal {

namespace {
constexpr uint64_t kWrap = (uint64_t)1 << 32;
constexpr uint64_t kHalfWrap = (uint64_t)1 << 31;
constexpr uintptr_t kAlign = 16;
}  // namespace

uint64_t UnwrapCycleDelta(uint32_t delta32, uint64_t approx_cycles) {
  if (approx_cycles <= delta32) return delta32;
  const uint64_t diff = approx_cycles - delta32;
  // Number of whole wraps, rounded to nearest (the +2^31 cannot overflow
  // once diff is below 2^64 - 2^31; above that saturate).
  // wraps <= 2^32 - 1, so wraps * 2^32 + delta32 fits uint64.
  const uint64_t wraps =
      diff > UINT64_MAX - kHalfWrap ? (UINT64_MAX >> 32) : (diff + kHalfWrap) >> 32;
  return wraps * kWrap + delta32;
}

uint64_t MicrosToCycles(uint64_t elapsed_us, uint32_t cpu_hz) {
  // Whole seconds and the remainder separately, so neither product can
  // overflow for any realistic elapsed time; saturate beyond that.
  if (cpu_hz == 0) return 0;
  const uint64_t secs = elapsed_us / 1000000u, rem = elapsed_us % 1000000u;
  if (secs > UINT64_MAX / cpu_hz / 2u) return UINT64_MAX;
  return secs * cpu_hz + rem * cpu_hz / 1000000u;  // rem * cpu_hz < 2^52
}

uint32_t AllocationOrder(espnn_mem_pref_t pref, bool have_psram, HeapKind order[2]) {
  switch (pref) {
    case ESPNN_MEM_INTERNAL_ONLY:
      order[0] = HeapKind::kInternal;
      return 1;
    case ESPNN_MEM_PSRAM_ONLY:
      if (!have_psram) return 0;
      order[0] = HeapKind::kPsram;
      return 1;
    case ESPNN_MEM_PSRAM_FIRST:
      // Without PSRAM (plain ESP32 boards) this degrades to internal RAM,
      // which is what lets one sdkconfig choice serve both kinds of boards.
      if (!have_psram) {
        order[0] = HeapKind::kInternal;
        return 1;
      }
      order[0] = HeapKind::kPsram;
      order[1] = HeapKind::kInternal;
      return 2;
    case ESPNN_MEM_INTERNAL_FIRST:
    default:
      order[0] = HeapKind::kInternal;
      if (!have_psram) return 1;
      order[1] = HeapKind::kPsram;
      return 2;
  }
}

void PoolAllocator::Init(void* base, size_t bytes) {
  base_ = nullptr;
  capacity_ = used_ = high_water_ = 0;
  if (base == nullptr) return;
  const uintptr_t start = (uintptr_t)base;
  const uintptr_t aligned = (start + (kAlign - 1)) & ~(kAlign - 1);
  const size_t skip = (size_t)(aligned - start);
  if (skip >= bytes) return;
  base_ = (uint8_t*)aligned;
  capacity_ = (bytes - skip) & ~(size_t)(kAlign - 1);
}

void* PoolAllocator::Allocate(size_t bytes) {
  if (base_ == nullptr) return nullptr;
  // Round the request up to the alignment without wrapping size_t.
  if (bytes > capacity_) return nullptr;
  const size_t rounded = (bytes + (kAlign - 1)) & ~(size_t)(kAlign - 1);
  if (rounded > capacity_ - used_) return nullptr;
  void* p = base_ + used_;
  used_ += rounded;
  if (used_ > high_water_) high_water_ = used_;
  return p;
}

espnn_log_level_t ConfiguredLogLevel() {
#if defined(CONFIG_ESPNN_LOG_LEVEL)
  return (espnn_log_level_t)CONFIG_ESPNN_LOG_LEVEL;
#else
  return ESPNN_LOG_INFO;
#endif
}

}  // namespace pal
}  // namespace espnn

extern "C" void espnn_pal_log(espnn_log_level_t level, const char* fmt, ...) {
  if (!espnn::pal::LogEnabled(level, espnn::pal::ConfiguredLogLevel())) return;
  char text[192];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (n < 0) text[0] = '\0';
  espnn_pal_log_sink(level, text);
}
