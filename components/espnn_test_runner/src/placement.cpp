// The runner's allocation order and its placement prediction (espnn/placement.h).
#include "espnn/placement.h"

namespace espnn {
namespace bundle {

uint32_t RequiredBytes(const MemoryRequirements& req, MemoryUse use) {
  switch (use) {
    case MemoryUse::kArena:
      return req.arena_bytes;
    case MemoryUse::kScratch:
      return req.scratch_bytes;
    case MemoryUse::kRegions:
      return req.persistent_bytes;
    case MemoryUse::kModelCopy:
      break;
  }
  return 0;
}

void PredictPlacement(const MemoryRequirements& req, espnn_mem_pref_t pref, bool have_psram,
                      uint32_t internal_budget, PlacedBlock out[kNumPlacedBlocks]) {
  pal::HeapKind order[2];
  const uint32_t heaps = pal::AllocationOrder(pref, have_psram, order);
  uint32_t left = internal_budget;
  for (uint32_t i = 0; i < kNumPlacedBlocks; ++i) {
    PlacedBlock& b = out[i];
    b.use = kAllocationOrder[i];
    b.bytes = RequiredBytes(req, b.use);
    b.internal_before = left;
    b.where = b.bytes == 0 ? Placement::kNone : Placement::kNoMemory;  // RunCase skips empty blocks
    for (uint32_t h = 0; h < heaps && b.where == Placement::kNoMemory; ++h) {
      if (order[h] == pal::HeapKind::kPsram) {
        b.where = Placement::kPsram;
      } else if (b.bytes <= left) {
        b.where = Placement::kInternal;
        left -= b.bytes;
      }
    }
  }
}

}  // namespace bundle
}  // namespace espnn
