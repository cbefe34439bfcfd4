// RunnerPlatform on top of the espnn_pal_* functions (espnn/platform.h).
// Portable: the ESP-IDF app and the host/emulator test shells differ only in
// which espnn_pal_* implementation they link.
#include <string.h>

#include "espnn/bundle_runner.h"

#if defined(ESP_PLATFORM)
#include "sdkconfig.h"
#if !CONFIG_IDF_TARGET_LINUX
#include "esp_memory_utils.h"
#define ESPNN_RUNNER_ON_CHIP 1
#endif
#endif

namespace espnn {
namespace bundle {

PalRunnerPlatform::PalRunnerPlatform(const PalPlatformConfig& config)
    : config_(config), caps_(espnn_pal_caps()) {
  if (config_.pool != nullptr) pool_.Init(config_.pool, config_.pool_bytes);
  last_yield_us_ = espnn_pal_time_us();
}

const char* PalRunnerPlatform::name() const { return espnn_pal_name(); }

void* PalRunnerPlatform::Alloc(size_t bytes, MemoryUse use) {
  if (use != MemoryUse::kModelCopy && config_.pool != nullptr) {
    void* p = pool_.Allocate(bytes);
    if (p != nullptr) ++pool_live_;
    return p;
  }
  return espnn_pal_malloc(bytes, use == MemoryUse::kModelCopy ? config_.weights
                                                               : config_.activations);
}

void PalRunnerPlatform::Free(void* ptr, MemoryUse use) {
  if (ptr == nullptr) return;
  if (use != MemoryUse::kModelCopy && config_.pool != nullptr) {
    // A bump pool frees everything at once, when the last block goes.
    if (pool_live_ > 0 && --pool_live_ == 0) pool_.Reset();
    return;
  }
  espnn_pal_free(ptr);
}

void PalRunnerPlatform::WriteLine(const char* line) {
  espnn_pal_write(line, strlen(line));
  espnn_pal_write("\n", 1);
}

bool PalRunnerPlatform::has_cycles() const { return (caps_ & ESPNN_PAL_CAP_CYCLES) != 0; }
uint32_t PalRunnerPlatform::CycleCount() { return espnn_pal_cycle_count(); }
uint32_t PalRunnerPlatform::cpu_hz() const { return espnn_pal_cpu_hz(); }
bool PalRunnerPlatform::has_time() const { return (caps_ & ESPNN_PAL_CAP_TIME) != 0; }
uint64_t PalRunnerPlatform::TimeUs() { return espnn_pal_time_us(); }

bool PalRunnerPlatform::HeapMinFree(uint32_t* bytes) {
  if ((caps_ & ESPNN_PAL_CAP_HEAP_STATS) == 0) return false;
  const size_t n = espnn_pal_heap_min_free();
  *bytes = n > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)n;
  return true;
}

void PalRunnerPlatform::Idle() {
  if (config_.yield == nullptr || config_.idle_yield_us == 0) return;
  const uint64_t now = espnn_pal_time_us();
  if (now - last_yield_us_ < config_.idle_yield_us) return;
  config_.yield();
  last_yield_us_ = espnn_pal_time_us();
}

const char* PalRunnerPlatform::MemoryKind(const void* ptr) const {
#if defined(ESPNN_RUNNER_ON_CHIP)
  if (esp_ptr_external_ram(ptr)) return "psram";
  if (esp_ptr_internal(ptr)) return "internal";
  return "flash";  // the memory-mapped data partition / .rodata
#else
  (void)ptr;
  return "heap";
#endif
}

}  // namespace bundle
}  // namespace espnn
