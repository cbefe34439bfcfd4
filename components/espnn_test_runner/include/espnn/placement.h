// Where the bundle runner puts a model's memory blocks, and a prediction of
// it for a chip whose free internal RAM is known (the compile report's
// "placement on an ESP32-S3" comes from here, through the binding).
//
// The runner allocates a case's blocks one after the other, in
// kAllocationOrder, each from the heaps espnn::pal::AllocationOrder lists
// for its memory preference (internal RAM first, PSRAM when a block does
// not fit, under ESPNN_MEMORY_INTERNAL_FIRST). RunCase walks the same table,
// so the prediction cannot drift from the order the runner really uses.
#pragma once

#include <stdint.h>

#include "espnn/interpreter.h"
#include "espnn/platform.h"

namespace espnn {
namespace bundle {

// kRegions: the fused regions' persistent descriptions (Interpreter::Init).
enum class MemoryUse : uint8_t { kArena, kScratch, kModelCopy, kRegions };

// The blocks of MemoryRequirements, in the order RunCase allocates them.
constexpr MemoryUse kAllocationOrder[] = {MemoryUse::kArena, MemoryUse::kScratch, MemoryUse::kRegions};
constexpr uint32_t kNumPlacedBlocks = sizeof(kAllocationOrder) / sizeof(kAllocationOrder[0]);

// Bytes of `use` in `req` (0 for kModelCopy, which is not part of it).
uint32_t RequiredBytes(const MemoryRequirements& req, MemoryUse use);

enum class Placement : uint8_t { kNone, kInternal, kPsram, kNoMemory };

struct PlacedBlock {
  MemoryUse use;
  uint32_t bytes;
  Placement where;                 // kNone for a 0-byte block (nothing is allocated)
  uint32_t largest_internal_before;  // the largest internal block free when this one is allocated
};

// Predicts RunCase's placement under `pref` on a chip with (or without)
// PSRAM whose internal RAM has `num_free` free blocks of `internal_free`
// bytes when the first block is allocated, listed in the order the heap
// allocator tries them (ESP-IDF's heap_caps: its heaps smallest first). A
// block takes the first free block it fits in, which shrinks by its bytes;
// the heap's own overhead and internal blocks not listed are not counted.
// PSRAM is taken as large enough. `out` has kNumPlacedBlocks entries, in
// kAllocationOrder.
void PredictPlacement(const MemoryRequirements& req, espnn_mem_pref_t pref, bool have_psram,
                      const uint32_t* internal_free, uint32_t num_free, PlacedBlock out[kNumPlacedBlocks]);

}  // namespace bundle
}  // namespace espnn
