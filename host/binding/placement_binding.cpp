// The bundle runner's memory placement rule (espnn/placement.h) for the
// compile report: which of a payload's blocks an ESP32-S3 app following the
// runner puts in internal RAM and which in PSRAM. The rule, the fallback
// order and the allocation order are the device code's; nothing is decided here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "espnn/placement.h"

namespace py = pybind11;
using namespace espnn;

namespace {

const char* UseName(bundle::MemoryUse use) {
  switch (use) {
    case bundle::MemoryUse::kArena:
      return "arena";
    case bundle::MemoryUse::kScratch:
      return "scratch";
    case bundle::MemoryUse::kRegions:
      return "regions";
    case bundle::MemoryUse::kModelCopy:
      break;
  }
  return "model_copy";
}

const char* PlacementName(bundle::Placement p) {
  switch (p) {
    case bundle::Placement::kInternal:
      return "internal";
    case bundle::Placement::kPsram:
      return "psram";
    case bundle::Placement::kNoMemory:
      return "no memory";
    case bundle::Placement::kNone:
      break;
  }
  return "none";
}

}  // namespace

void bind_placement(py::module_& m) {
  // espnn_mem_pref_t by the suffix of its Kconfig / enum name (ESPNN_MEMORY_<name>).
  py::dict prefs;
  prefs["INTERNAL_FIRST"] = (int)ESPNN_MEM_INTERNAL_FIRST;
  prefs["PSRAM_FIRST"] = (int)ESPNN_MEM_PSRAM_FIRST;
  prefs["INTERNAL_ONLY"] = (int)ESPNN_MEM_INTERNAL_ONLY;
  prefs["PSRAM_ONLY"] = (int)ESPNN_MEM_PSRAM_ONLY;
  m.attr("MEMORY_PREFERENCES") = prefs;
  py::list order;
  for (const bundle::MemoryUse use : bundle::kAllocationOrder) order.append(UseName(use));
  m.attr("RUNNER_ALLOCATION_ORDER") = order;
  m.def(
      "predict_placement",
      [](uint32_t arena, uint32_t scratch, uint32_t persistent, const std::string& preference,
         bool have_psram, const std::vector<uint32_t>& internal_free) {
        espnn_mem_pref_t pref;
        if (preference == "INTERNAL_FIRST")
          pref = ESPNN_MEM_INTERNAL_FIRST;
        else if (preference == "PSRAM_FIRST")
          pref = ESPNN_MEM_PSRAM_FIRST;
        else if (preference == "INTERNAL_ONLY")
          pref = ESPNN_MEM_INTERNAL_ONLY;
        else if (preference == "PSRAM_ONLY")
          pref = ESPNN_MEM_PSRAM_ONLY;
        else
          throw py::value_error("unknown memory preference '" + preference + "' (MEMORY_PREFERENCES)");
        const MemoryRequirements req{arena, scratch, persistent};
        bundle::PlacedBlock out[bundle::kNumPlacedBlocks];
        bundle::PredictPlacement(req, pref, have_psram, internal_free.data(), (uint32_t)internal_free.size(),
                                 out);
        py::list blocks;
        for (const bundle::PlacedBlock& b : out) {
          py::dict d;
          d["block"] = UseName(b.use);
          d["bytes"] = b.bytes;
          d["memory"] = PlacementName(b.where);
          d["largest_internal_before"] = b.largest_internal_before;
          blocks.append(d);
        }
        return blocks;
      },
      py::arg("arena_bytes"), py::arg("scratch_bytes"), py::arg("persistent_bytes"), py::arg("preference"),
      py::arg("have_psram"), py::arg("internal_free"),
      "PredictPlacement of espnn/placement.h: the bundle runner's blocks in its allocation order, each "
      "{block, bytes, memory: internal|psram|none|no memory, largest_internal_before}, for a memory "
      "preference (MEMORY_PREFERENCES) and the free internal blocks at the first allocation, in the "
      "order the heap allocator tries them.");
}
