// Fused regions (BAND_LOOP, xts3_format.h): how a region of a Model maps to
// the row arithmetic of espnn/band_geometry.h, its parse-time checks and
// its execution band by band. ops/band_loop.cpp.
#pragma once

#include <stdint.h>

#include "espnn/band_geometry.h"
#include "espnn/model.h"
#include "espnn/status.h"
#include "ops/op_kernel.h"

namespace espnn {
namespace band {

// The region of the BAND_LOOP at op `loop`, checked (structure, tensors;
// CheckRegions adds capacities and IN_PLACE) and described. `r`'s arrays
// must be attached (RegionStorage::Attach).
Status DescribeRegion(const Model& m, uint32_t loop, Region* r);

// Persistent per-region data (docs/performance.md, "Fused regions: memory
// and stack"): every region of a parsed model described once, at
// Interpreter::Init, for EvalBandLoop to read. Per region a 32-byte record
// and its arrays: PerRegionBytes(ops, tensors) = 32 + (41*ops + 7*tensors
// rounded up to 16). Pointer-free, so the same bytes on every target.
constexpr uint32_t kPersistentAlignment = 16;
// The persistent bytes a parsed model needs (0 without fused regions).
uint32_t RegionsBytes(const Model& m);
// Describes every region into `mem` (RegionsBytes(m) bytes, 16-byte
// aligned): the records first, in op order, then their arrays.
Status DescribeRegions(const Model& m, void* mem, uint32_t bytes, uint32_t* count);
// The region of the BAND_LOOP at op `loop` among the `count` regions
// DescribeRegions wrote at `mem`: a view whose arrays point into `mem`.
bool FindRegion(const void* mem, uint32_t count, uint32_t loop, Region* r);

// Parse-time checks of every region of the model, including that no BANDED
// tensor is read outside its region. Runs after every op passed CheckOp.
Status CheckRegions(const Model& m);

// The BAND_LOOP op whose region contains op `index`, else kNotInRegion.
constexpr uint32_t kNotInRegion = 0xFFFFFFFFu;
uint32_t EnclosingLoop(const Model& m, uint32_t index);

// For op `index` inside a fused region: the most output rows one band call
// of it computes (a kernel sizes its scratch for such calls too: a band's
// pads may route it differently from the whole layer). 0 outside regions.
uint32_t MaxCallRows(const Model& m, uint32_t index);

// True for the last op of an IN_PLACE region: its output sits on its input's
// bytes but it writes through the staging buffer (kernels that refuse an
// overlapping output accept this one; the parser's arena check decides).
bool WritesThroughStaging(const Model& m, const OpInfo& op);

}  // namespace band
}  // namespace espnn
