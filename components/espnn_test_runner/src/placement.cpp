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

namespace {

constexpr uint32_t kMaxFree = 8;  // free internal blocks a prediction follows

uint32_t Largest(const uint32_t* free, uint32_t n) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; ++i) m = free[i] > m ? free[i] : m;
  return m;
}

}  // namespace

void PredictPlacement(const MemoryRequirements& req, espnn_mem_pref_t pref, bool have_psram,
                      const uint32_t* internal_free, uint32_t num_free, PlacedBlock out[kNumPlacedBlocks]) {
  pal::HeapKind order[2];
  const uint32_t heaps = pal::AllocationOrder(pref, have_psram, order);
  uint32_t left[kMaxFree];
  const uint32_t n = num_free < kMaxFree ? num_free : kMaxFree;
  for (uint32_t i = 0; i < n; ++i) left[i] = internal_free[i];
  for (uint32_t i = 0; i < kNumPlacedBlocks; ++i) {
    PlacedBlock& b = out[i];
    b.use = kAllocationOrder[i];
    b.bytes = RequiredBytes(req, b.use);
    b.largest_internal_before = Largest(left, n);
    b.where = b.bytes == 0 ? Placement::kNone : Placement::kNoMemory;  // RunCase skips empty blocks
    for (uint32_t h = 0; h < heaps && b.where == Placement::kNoMemory; ++h) {
      if (order[h] == pal::HeapKind::kPsram) {
        b.where = Placement::kPsram;
        continue;
      }
      for (uint32_t f = 0; f < n; ++f) {
        if (b.bytes <= left[f]) {
          b.where = Placement::kInternal;
          left[f] -= b.bytes;
          break;
        }
      }
    }
  }
}

}  // namespace bundle
}  // namespace espnn
