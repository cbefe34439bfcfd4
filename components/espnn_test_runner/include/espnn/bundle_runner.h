// Runs every case of an XTSB bundle: verify first, then time.
//
// For each case the runner places the model (in place, or copied to an
// aligned buffer), parses it, allocates arena and scratch, runs it once and
// compares every output byte with the expected bytes. Only a case whose
// outputs are bit-exact is timed: N runs, each preceded by a fresh copy of
// the inputs (outside the timed region), each measured with the cycle
// counter and the microsecond clock. After the last run the outputs are
// compared again. One machine-readable line per case is written:
//
//   ESPNN_BEGIN v=1 platform=<name> cpu_hz=<n> cases=<n> bundle_bytes=<n>
//   ESPNN_RESULT v=1 case=<name> status=pass runs=<n> ops=<n> arena=<bytes>
//       scratch=<bytes> model_bytes=<n> weights=inplace|copy|copy-align
//       alloc=<bytes> heap_free_min=<bytes|na> cycles_min=<n|na>
//       cycles_mean=<n|na> cycles_max=<n|na> us_min=<n|na> us_mean=<n.nnn|na>
//       us_max=<n|na>
//   ESPNN_RESULT v=1 case=<name> status=mismatch stage=verify|after-timing
//       output=<i> element=<j> got=0x<hex> expected=0x<hex> diff_elements=<n>
//       of=<n>
//   ESPNN_RESULT v=1 case=<name> status=error stage=<place|parse|alloc|init|
//       inputs|expected|invoke> msg=<rest of the line>
//   ESPNN_END v=1 cases=<n> passed=<n> failed=<n>
//   ESPNN_BUNDLE_ERROR v=1 msg=<rest of the line>    (then ESPNN_END ... failed=1)
//
// (Each record is one line; it is wrapped here for reading.) The records,
// the error/mismatch fields and the timing fields are built by the rule both
// modes share (espnn/result_line.h). Everything here
// is portable C++: it runs on the host and on the emulated Xtensa core in the
// tests, and on the chip through a RunnerPlatform backed by the ESP-IDF PAL.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/bundle.h"
#include "espnn/placement.h"  // MemoryUse and the allocation order
#include "espnn/platform.h"

namespace espnn {
namespace bundle {


// What the runner needs from the platform. Defaults describe a platform
// without clocks or heap statistics.
class RunnerPlatform {
 public:
  virtual ~RunnerPlatform() = default;
  virtual const char* name() const = 0;
  // 16-byte aligned block or nullptr; Free gets the same `use`.
  virtual void* Alloc(size_t bytes, MemoryUse use) = 0;
  virtual void Free(void* ptr, MemoryUse use) = 0;
  virtual void WriteLine(const char* line) = 0;  // no trailing newline in `line`
  virtual bool has_cycles() const { return false; }
  virtual uint32_t CycleCount() { return 0; }
  virtual uint32_t cpu_hz() const { return 0; }
  virtual bool has_time() const { return false; }
  virtual uint64_t TimeUs() { return 0; }
  // Lowest free heap since boot; false if unknown.
  virtual bool HeapMinFree(uint32_t* bytes) {
    (void)bytes;
    return false;
  }
  // Called between timed runs and between cases, outside any timed region
  // (the ESP-IDF shell lets lower-priority tasks and the watchdog run).
  virtual void Idle() {}
  // Which memory `ptr` lies in, for the result line: "internal", "psram" or
  // "flash" (memory-mapped) on a chip; "heap" where there is one kind.
  virtual const char* MemoryKind(const void* ptr) const {
    (void)ptr;
    return "heap";
  }
};

enum class WeightPlacement : uint8_t {
  kInPlace,  // parse the model where it lies (flash mmap, .rodata), copy only if misaligned
  kCopy,     // always copy the model (to the memory chosen by the platform for kModelCopy)
};

struct RunnerOptions {
  uint32_t default_runs = 10;  // for cases whose record says 0
  WeightPlacement weights = WeightPlacement::kInPlace;
};

struct RunSummary {
  uint32_t cases = 0;
  uint32_t passed = 0;
  uint32_t failed = 0;
  bool bundle_ok = false;
};

// Parses the bundle at `data` and runs every case, writing the lines above.
RunSummary RunBundle(const void* data, size_t size, RunnerPlatform& platform,
                     const RunnerOptions& options);

// Runs one case of a parsed bundle and writes its result line; true on pass.
bool RunCase(const Case& c, RunnerPlatform& platform, const RunnerOptions& options);

// A RunnerPlatform on top of the espnn_pal_* C functions (espnn/platform.h):
// what the ESP-IDF app and the host/emulator shells use. Arena and scratch
// come from `pool` when one is given (the "runtime allocator" memory
// source), else from espnn_pal_malloc with `activations`; model copies come
// from espnn_pal_malloc with `weights`.
struct PalPlatformConfig {
  espnn_mem_pref_t activations = ESPNN_MEM_INTERNAL_FIRST;
  espnn_mem_pref_t weights = ESPNN_MEM_INTERNAL_FIRST;
  void* pool = nullptr;
  size_t pool_bytes = 0;
  // Minimum microseconds between two yields in Idle(); 0 = never yield.
  uint32_t idle_yield_us = 0;
  void (*yield)(void) = nullptr;
};

class PalRunnerPlatform : public RunnerPlatform {
 public:
  explicit PalRunnerPlatform(const PalPlatformConfig& config);
  const char* name() const override;
  void* Alloc(size_t bytes, MemoryUse use) override;
  void Free(void* ptr, MemoryUse use) override;
  void WriteLine(const char* line) override;
  bool has_cycles() const override;
  uint32_t CycleCount() override;
  uint32_t cpu_hz() const override;
  bool has_time() const override;
  uint64_t TimeUs() override;
  bool HeapMinFree(uint32_t* bytes) override;
  void Idle() override;
  const char* MemoryKind(const void* ptr) const override;

 private:
  PalPlatformConfig config_;
  uint32_t caps_;
  pal::PoolAllocator pool_;
  uint32_t pool_live_ = 0;  // live pool blocks; the pool resets when it reaches 0
  uint64_t last_yield_us_ = 0;
};

}  // namespace bundle
}  // namespace espnn
