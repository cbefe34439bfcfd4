// Checks of the platform layer's portable logic and of the ExecuTorch PAL
// mapping, run by `bundle_runner --selftest` on the host and on the emulated
// Xtensa core (where size_t is 32 bits and unaligned loads trap). Prints one
// line per check and a summary: "SELFTEST passed=N failed=M".
#include <stdio.h>
#include <string.h>

#include "espnn/bundle.h"
#include "espnn/container_header.h"
#include "espnn/platform.h"
#include "espnn/pte_suite.h"
#include "stdio_pal.h"

extern "C" {
// ExecuTorch's PAL hooks, defined by src/platform_et_pal.cpp (linked into
// the test runner as the firmware links it with CONFIG_ESPNN_PAL_EXECUTORCH).
typedef struct {
  uint64_t numerator;
  uint64_t denominator;
} espnn_test_tick_ratio_t;
void et_pal_init(void);
uint64_t et_pal_current_ticks(void);
espnn_test_tick_ratio_t et_pal_ticks_to_ns_multiplier(void);
void et_pal_emit_log_message(uint64_t timestamp, int level, const char* filename,
                             const char* function, size_t line, const char* message, size_t length);
void* et_pal_allocate(size_t size);
void et_pal_free(void* ptr);
}

namespace {

int g_passed = 0, g_failed = 0;

void Check(bool ok, const char* what) {
  printf("SELFTEST %s %s\n", ok ? "ok  " : "FAIL", what);
  (ok ? g_passed : g_failed)++;
}

constexpr uint64_t kWrap = (uint64_t)1 << 32;

void TestUnwrap() {
  using espnn::pal::UnwrapCycleDelta;
  Check(UnwrapCycleDelta(100, 0) == 100, "unwrap: no clock estimate keeps the 32-bit delta");
  Check(UnwrapCycleDelta(100, 90) == 100, "unwrap: estimate below the delta keeps it");
  Check(UnwrapCycleDelta(100, kWrap + 120) == kWrap + 100, "unwrap: one wrap");
  Check(UnwrapCycleDelta(10, 3 * kWrap + 10 - 1000) == 3 * kWrap + 10,
        "unwrap: estimate slightly low still picks the right wrap");
  Check(UnwrapCycleDelta(0xFFFFFF00u, kWrap + 0xFFFFFF00u - 5) == kWrap + 0xFFFFFF00u,
        "unwrap: delta near 2^32");
  Check(UnwrapCycleDelta(10, 10 + (kWrap >> 1) - 1) == 10,
        "unwrap: just under half a wrap rounds down");
  Check(UnwrapCycleDelta(10, 10 + (kWrap >> 1)) == kWrap + 10, "unwrap: half a wrap rounds up");
  Check(UnwrapCycleDelta(5, UINT64_MAX) >= UINT64_MAX - kWrap, "unwrap: huge estimate saturates");
  // The wrap-around itself: readings straddling 2^32 give end - start mod 2^32.
  const uint32_t start = 0xFFFFFFF0u, end = 0x20u;
  Check(UnwrapCycleDelta(end - start, 0) == 0x30u, "unwrap: counter wrapped between readings");

  using espnn::pal::MicrosToCycles;
  Check(MicrosToCycles(1000000u, 240000000u) == 240000000u, "micros->cycles: 1 s at 240 MHz");
  Check(MicrosToCycles(17895697u, 240000000u) == 4294967280ull, "micros->cycles: 17.9 s");
  Check(MicrosToCycles(3u, 240000000u) == 720u, "micros->cycles: 3 us");
  Check(MicrosToCycles(UINT64_MAX, 240000000u) == UINT64_MAX, "micros->cycles: saturates");
  Check(MicrosToCycles(5u, 0u) == 0u, "micros->cycles: unknown clock");

  espnn::pal::CycleExtender ext;
  const uint64_t a = ext.Extend(0xFFFFFFF0u), b = ext.Extend(0x10u), c = ext.Extend(0x20u);
  Check(a == 0xFFFFFFF0u && b == kWrap + 0x10u && c == kWrap + 0x20u,
        "cycle extender: 64-bit across a wrap");
}

void TestAllocationOrder() {
  using espnn::pal::AllocationOrder;
  using espnn::pal::HeapKind;
  HeapKind o[2];
  Check(AllocationOrder(ESPNN_MEM_INTERNAL_FIRST, true, o) == 2 && o[0] == HeapKind::kInternal &&
            o[1] == HeapKind::kPsram,
        "order: internal first, then PSRAM");
  Check(AllocationOrder(ESPNN_MEM_INTERNAL_FIRST, false, o) == 1 && o[0] == HeapKind::kInternal,
        "order: internal first without PSRAM");
  Check(AllocationOrder(ESPNN_MEM_PSRAM_FIRST, true, o) == 2 && o[0] == HeapKind::kPsram &&
            o[1] == HeapKind::kInternal,
        "order: PSRAM first, internal fallback");
  Check(AllocationOrder(ESPNN_MEM_PSRAM_FIRST, false, o) == 1 && o[0] == HeapKind::kInternal,
        "order: PSRAM first on a chip without PSRAM falls back to internal RAM");
  Check(AllocationOrder(ESPNN_MEM_PSRAM_ONLY, false, o) == 0,
        "order: PSRAM only without PSRAM fails");
  Check(AllocationOrder(ESPNN_MEM_INTERNAL_ONLY, true, o) == 1 && o[0] == HeapKind::kInternal,
        "order: internal only");
}

void TestPool() {
  alignas(16) static uint8_t buffer[256 + 16];
  espnn::pal::PoolAllocator pool(buffer + 3, 256);  // misaligned base
  void* a = pool.Allocate(10);
  void* b = pool.Allocate(17);
  Check(a != nullptr && b != nullptr && (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0,
        "pool: blocks are 16-byte aligned");
  Check((uint8_t*)a >= buffer + 3 && (uint8_t*)b + 17 <= buffer + 3 + 256,
        "pool: blocks inside the buffer");
  Check(pool.capacity() == 240 && pool.used() == 48, "pool: capacity and rounding");
  Check(pool.Allocate(200) == nullptr, "pool: exhaustion returns null");
  Check(pool.Allocate((size_t)-1) == nullptr && pool.Allocate((size_t)-8) == nullptr,
        "pool: huge requests do not wrap");
  pool.Reset();
  Check(pool.used() == 0 && pool.Allocate(240) != nullptr && pool.high_water() == 240,
        "pool: reset and high-water mark");
  espnn::pal::PoolAllocator tiny(buffer + 1, 10);
  Check(tiny.Allocate(1) == nullptr, "pool: buffer smaller than the alignment skip");
}

void TestCrcAndPeek() {
  const char* s = "123456789";
  const uint32_t crc = espnn::container::Crc32((const uint8_t*)s, 9);
  Check(crc == 0xCBF43926u, "crc32: check value of \"123456789\"");
  const uint32_t part = espnn::container::Crc32((const uint8_t*)s, 4);
  Check(espnn::container::Crc32((const uint8_t*)s + 4, 5, part) == crc, "crc32: incremental");
  Check(espnn::container::Crc32(nullptr, 0) == 0, "crc32: empty");

  uint8_t h[40] = {'X', 'T', 'S', 'B', 1, 0, 32, 0, 0x40, 0x01, 0, 0};
  Check(espnn::bundle::PeekBundleSize(h, sizeof(h)) == 0x140, "peek: bundle size");
  Check(espnn::bundle::PeekBundleSize(h + 1, sizeof(h) - 1) == 0, "peek: not a header");
  Check(espnn::bundle::PeekBundleSize(h, 31) == 0, "peek: short header");
  h[4] = 2;
  Check(espnn::bundle::PeekBundleSize(h, sizeof(h)) == 0, "peek: other version");

  // The suite peek is the same rule over the XTSP header layout.
  uint8_t sh[48] = {'X', 'T', 'S', 'P', 1, 0, 48, 0, 0x00, 0x02, 0, 0};
  Check(espnn::pte::PeekSuiteSize(sh, sizeof(sh)) == 0x200, "peek: suite size");
  Check(espnn::pte::PeekSuiteSize(sh, 47) == 0, "peek: short suite header");
  h[4] = 1;
  Check(espnn::pte::PeekSuiteSize(h, sizeof(h)) == 0, "peek: a bundle is not a suite");
  Check(espnn::bundle::PeekBundleSize(sh, sizeof(sh)) == 0, "peek: a suite is not a bundle");
  sh[11] = 0x80;
  Check(espnn::pte::PeekSuiteSize(sh, sizeof(sh)) == 0, "peek: suite size beyond the container limit");
}

void TestEtPal() {
  et_pal_init();
  const espnn_test_tick_ratio_t r = et_pal_ticks_to_ns_multiplier();
  Check(r.numerator == 1000 && r.denominator == 1, "et_pal: ticks are microseconds");
  const uint64_t t0 = et_pal_current_ticks(), t1 = et_pal_current_ticks();
  Check(t1 >= t0, "et_pal: ticks do not go backwards");

  const char msg[] = "hello from executorch";
  et_pal_emit_log_message(0, 'E', "/src/runtime/method.cpp", "fn", 42, msg, 5);
  Check(strcmp(espnn_test_last_log(), "[et method.cpp:42] hello") == 0 &&
            espnn_test_last_log_level() == ESPNN_LOG_ERROR,
        "et_pal: error message reaches the log with file, line and length");
  et_pal_emit_log_message(0, 'D', "a.cpp", "fn", 1, "debug", 5);
  Check(strcmp(espnn_test_last_log(), "[et method.cpp:42] hello") == 0,
        "et_pal: debug is filtered at the default INFO level");
  void* p = et_pal_allocate(100);
  Check(p != nullptr && (uintptr_t)p % 16 == 0 &&
            espnn_test_last_pref() == ESPNN_MEM_INTERNAL_FIRST,
        "et_pal: allocate is 16-byte aligned, internal RAM first");
  et_pal_free(p);

  char long_text[300];
  memset(long_text, 'x', sizeof(long_text) - 1);
  long_text[sizeof(long_text) - 1] = '\0';
  espnn_pal_log(ESPNN_LOG_WARN, "%s", long_text);
  Check(strlen(espnn_test_last_log()) == 191, "log: messages are truncated to 191 characters");
  Check(espnn::pal::LogEnabled(ESPNN_LOG_ERROR, ESPNN_LOG_INFO) &&
            !espnn::pal::LogEnabled(ESPNN_LOG_DEBUG, ESPNN_LOG_INFO) &&
            !espnn::pal::LogEnabled(ESPNN_LOG_ERROR, ESPNN_LOG_NONE),
        "log: level filter");
}

void TestTypes() {
  // What the 32-bit target is: the checks above must hold there too.
  printf("SELFTEST info sizeof(size_t)=%u sizeof(void*)=%u\n", (unsigned)sizeof(size_t),
         (unsigned)sizeof(void*));
}

}  // namespace

int RunPlatformSelftest() {
  TestTypes();
  TestUnwrap();
  TestAllocationOrder();
  TestPool();
  TestCrcAndPeek();
  TestEtPal();
  printf("SELFTEST passed=%d failed=%d\n", g_passed, g_failed);
  return g_failed;
}
