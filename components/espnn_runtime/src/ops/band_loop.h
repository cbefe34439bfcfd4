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

// The region of the BAND_LOOP at op `loop`, checked (structure, tensors, the
// capacity of every BANDED tensor and of the staging buffer) and described
// on local tensor indices; `tensors[local]` is the Model's tensor.
struct Region {
  uint32_t first_op, num_ops, band_rows;
  bool in_place;
  uint16_t staging;  // the BAND_LOOP's output (kNoTensor when not in place)
  RegionDesc desc;
  uint16_t tensors[xts3::kMaxRegionTensors];
  bool produced[xts3::kMaxRegionTensors];
};
Status DescribeRegion(const Model& m, uint32_t loop, Region* r);

// Parse-time checks of every region of the model, including that no BANDED
// tensor is read outside its region. Runs after every op passed CheckOp.
Status CheckRegions(const Model& m);

// The BAND_LOOP op whose region contains op `index`, else kNotInRegion.
constexpr uint32_t kNotInRegion = 0xFFFFFFFFu;
uint32_t EnclosingLoop(const Model& m, uint32_t index);

// True for the last op of an IN_PLACE region: its output sits on its input's
// bytes but it writes through the staging buffer (kernels that refuse an
// overlapping output accept this one; the parser's arena check decides).
bool WritesThroughStaging(const Model& m, const OpInfo& op);

}  // namespace band
}  // namespace espnn
