// Platform layer (PAL) of the ESP-NN runtime.
//
// Two halves:
//   * The C functions espnn_pal_* below: clock, cycle counter, console,
//     aligned allocation with a memory preference, heap statistics. One
//     implementation per platform: src/platform_esp_idf.cpp (ESP-IDF:
//     esp_timer, esp_cpu_get_cycle_count, heap_caps, esp_log) and
//     tests/firmware/stdio_pal.cpp (host and the xtensa-sim emulator);
//     host builds of the ExecuTorch delegate link only the allocation and
//     log-sink hooks, from src/platform_host.cpp (the delegate's heap memory
//     source, Kconfig ESPNN_MEMORY_INTERNAL_FIRST / _PSRAM_FIRST). Every
//     symbol is prefixed espnn_pal_ so it cannot collide with another
//     runtime's PAL; ExecuTorch's et_pal_* hooks are implemented on top of
//     these in src/platform_et_pal.cpp, which is compiled only when
//     CONFIG_ESPNN_PAL_EXECUTORCH is enabled.
//   * Portable C++ helpers (namespace espnn::pal) holding all the logic that
//     does not touch hardware: cycle-counter wrap-around, the allocation
//     fallback order, a bump pool, log-level filtering. They compile and are
//     tested on the host and on the emulated Xtensa core.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Log levels, ordered; a message is emitted when level <= the configured
// threshold (CONFIG_ESPNN_LOG_LEVEL, 0 = silent).
typedef enum {
  ESPNN_LOG_NONE = 0,
  ESPNN_LOG_ERROR = 1,
  ESPNN_LOG_WARN = 2,
  ESPNN_LOG_INFO = 3,
  ESPNN_LOG_DEBUG = 4,
} espnn_log_level_t;

// Where an allocation should come from. "Internal" is on-chip SRAM, "PSRAM"
// the external RAM of boards that have it. *_FIRST falls back to the other
// kind; *_ONLY does not. On platforms without such a distinction every value
// means "the heap".
typedef enum {
  ESPNN_MEM_INTERNAL_FIRST = 0,
  ESPNN_MEM_PSRAM_FIRST = 1,
  ESPNN_MEM_INTERNAL_ONLY = 2,
  ESPNN_MEM_PSRAM_ONLY = 3,
} espnn_mem_pref_t;

// Capability bits returned by espnn_pal_caps().
#define ESPNN_PAL_CAP_CYCLES 0x1u      // espnn_pal_cycle_count() counts CPU cycles
#define ESPNN_PAL_CAP_TIME 0x2u        // espnn_pal_time_us() is a real clock
#define ESPNN_PAL_CAP_HEAP_STATS 0x4u  // espnn_pal_heap_min_free() is meaningful
#define ESPNN_PAL_CAP_PSRAM 0x8u       // a PSRAM heap exists

void espnn_pal_init(void);
uint32_t espnn_pal_caps(void);
// Short platform name for result lines ("esp32s3", "host", "xtensa-sim").
const char* espnn_pal_name(void);
// Monotonic microseconds since an arbitrary origin; 64 bits, never wraps.
uint64_t espnn_pal_time_us(void);
// The CPU's raw 32-bit cycle counter (wraps; see espnn::pal::UnwrapCycleDelta).
// Per core on dual-core chips: compare readings taken on the same core.
uint32_t espnn_pal_cycle_count(void);
// Nominal CPU clock in Hz, 0 if unknown.
uint32_t espnn_pal_cpu_hz(void);
// 16-byte aligned block of at least `bytes` bytes, or NULL.
void* espnn_pal_malloc(size_t bytes, espnn_mem_pref_t pref);
void espnn_pal_free(void* ptr);
// Lowest free heap (bytes, all 8-bit capable RAM) seen since boot, i.e. the
// heap high-water mark; meaningful only with ESPNN_PAL_CAP_HEAP_STATS.
size_t espnn_pal_heap_min_free(void);
// Writes `n` bytes to the console (result lines; no filtering).
void espnn_pal_write(const char* text, size_t n);
// Emits one log message (no trailing newline in `text`). The caller has
// already applied the level filter (espnn::pal::LogEnabled).
void espnn_pal_log_sink(espnn_log_level_t level, const char* text);
__attribute__((noreturn)) void espnn_pal_abort(void);

// printf-style logging through espnn_pal_log_sink, filtered by the
// configured level; messages are truncated to 191 characters.
void espnn_pal_log(espnn_log_level_t level, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}  // extern "C"

namespace espnn {
namespace pal {

// ------------------------------------------------------------ cycle counter
// A 32-bit cycle counter wraps every 2^32 cycles (17.9 s at 240 MHz). The
// difference end - start taken modulo 2^32 is right for intervals shorter
// than that. For longer ones, a coarse clock that does not wrap (esp_timer,
// microseconds) tells how many whole wraps happened: the result is the value
// congruent to delta32 modulo 2^32 that is closest to approx_cycles. Correct
// as long as approx_cycles is off by less than 2^31 cycles (8.9 s at 240 MHz).
uint64_t UnwrapCycleDelta(uint32_t delta32, uint64_t approx_cycles);

// Cycles that `elapsed_us` microseconds take at `cpu_hz` (saturating).
uint64_t MicrosToCycles(uint64_t elapsed_us, uint32_t cpu_hz);

// Extends successive readings of a 32-bit counter to 64 bits. Correct when
// it sees at least one reading per wrap period; not thread-safe (one per
// task/core).
class CycleExtender {
 public:
  uint64_t Extend(uint32_t now) {
    if (started_ && now < last_) high_ += (uint64_t)1 << 32;
    started_ = true;
    last_ = now;
    return high_ | now;
  }

 private:
  bool started_ = false;
  uint32_t last_ = 0;
  uint64_t high_ = 0;
};

// ------------------------------------------------------------ allocation
enum class HeapKind : uint8_t { kInternal, kPsram };

// The heaps to try, in order, for a preference on a chip with or without
// PSRAM. Returns how many entries of `order` (capacity 2) are filled; 0 means
// the request cannot be served (PSRAM_ONLY without PSRAM).
uint32_t AllocationOrder(espnn_mem_pref_t pref, bool have_psram, HeapKind order[2]);

// Bump allocator over a caller-owned buffer (the "runtime allocator" memory
// source: the caller hands the runtime one block up front, as ExecuTorch's
// MemoryAllocator does). Blocks are 16-byte aligned; Reset() frees them all.
class PoolAllocator {
 public:
  PoolAllocator() = default;
  PoolAllocator(void* base, size_t bytes) { Init(base, bytes); }
  void Init(void* base, size_t bytes);
  void* Allocate(size_t bytes);  // nullptr when the pool is exhausted
  void Reset() { used_ = 0; }
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  size_t high_water() const { return high_water_; }

 private:
  uint8_t* base_ = nullptr;  // first 16-byte aligned byte of the buffer
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

// ------------------------------------------------------------ logging
// Threshold compiled in from CONFIG_ESPNN_LOG_LEVEL (default: INFO).
espnn_log_level_t ConfiguredLogLevel();
inline bool LogEnabled(espnn_log_level_t level, espnn_log_level_t threshold) {
  return level != ESPNN_LOG_NONE && level <= threshold;
}

}  // namespace pal
}  // namespace espnn
#endif  // __cplusplus
