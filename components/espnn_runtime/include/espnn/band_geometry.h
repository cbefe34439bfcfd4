// Row arithmetic of fused regions (BAND_LOOP, xts3_format.h): which input
// rows a range of output rows reads, and, for a whole region, which rows of
// every tensor each band needs; and the region description itself (Region,
// DescribeCandidate: the parser's rules, asked by the Python planner). Stated once here and used by the parser
// (capacity checks), the interpreter (the band loop) and, through the
// binding (_native.plan_band_region), the Python planner.
//
// A region is described on plain arrays (no Model), with tensors numbered
// locally 0..num_tensors-1: every op has one output and up to
// kMaxRegionOpRowInputs inputs whose rows it reads through a RowWindow
// (constant inputs such as filters are not part of the description).
//
// Why no row is ever computed twice: the rows a band needs of a tensor,
// [lo, hi), never move backwards from one band to the next (InputRows is
// monotone in both ends, and a hull of monotone ranges is monotone). So a
// band keeps the rows [lo, previous hi) it already has and computes only
// [max(lo, previous hi), hi); the buffer of a tensor must hold hi - lo rows.
//
// All arithmetic is on int64 over values below 2^24 (tensor dims), 65535
// (stride, extent, den) and 2^31 (pad): nothing can overflow on a 32-bit
// target.
#pragma once

#include <stdint.h>

#include "espnn/model.h"
#include "espnn/status.h"
#include "espnn/xts3_format.h"

namespace espnn {
namespace band {

// Output row r reads input rows [lo(r), lo(r) + extent), clipped to the
// image, with lo(r) = floor((r*stride - pad) / den): a row stride of
// stride/den input rows per output row. Windows over the input (conv, pool;
// elementwise ops: {1, 0, 1}) have den = 1, so lo(r) = r*stride - pad; the
// upsampling ops (RESIZE_*, TRANSPOSE_CONV2D) have a rational stride below
// one, and pad may then be negative. lo is monotone in r either way, so the
// ranges below stay monotone. 12 bytes, as before den was added (the
// persistent size per region op is pinned in docs/performance.md).
struct RowWindow {
  int32_t stride, pad;
  uint16_t extent, den;
};

// floor(a / b) for b > 0 (C++ division truncates towards zero).
inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Rows [lo, hi); empty when lo >= hi.
struct RowRange {
  uint32_t lo, hi;
  bool empty() const { return lo >= hi; }
  uint32_t size() const { return hi > lo ? hi - lo : 0; }
};

inline RowRange InputRows(const RowWindow& w, uint32_t in_h, RowRange out) {
  if (out.empty()) return {0, 0};
  int64_t lo = FloorDiv((int64_t)out.lo * w.stride - w.pad, w.den);
  int64_t hi = FloorDiv(((int64_t)out.hi - 1) * w.stride - w.pad, w.den) + w.extent;
  if (lo < 0) lo = 0;
  if (hi > (int64_t)in_h) hi = in_h;
  if (hi <= lo) return {0, 0};
  return {(uint32_t)lo, (uint32_t)hi};
}

// The smallest range holding both.
inline RowRange Hull(RowRange a, RowRange b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return {a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
}

constexpr uint32_t kMaxRegionOpRowInputs = 2;

struct RegionOpDesc {
  uint32_t out;  // local tensor written
  uint32_t num_inputs;
  uint32_t in[kMaxRegionOpRowInputs];
  RowWindow window[kMaxRegionOpRowInputs];
};

// ops run in order; the last op's output is the region output. A tensor no
// region op writes is a region input (a full tensor written before).
// The arrays live elsewhere (RegionDescStorage at the format's limits while
// a region is checked; sized to the region in the interpreter's persistent
// memory, ops/band_loop.h), so a described region costs what it holds.
struct RegionDesc {
  uint32_t num_ops;
  uint32_t num_tensors;
  RegionOpDesc* ops;  // [num_ops]
  uint32_t* height;   // [num_tensors]
  // Local index of the tensor an IN_PLACE region overwrites with its output
  // (num_tensors when not in place).
  uint32_t in_place_input;
};

// Room for the arrays of any region the format allows.
struct RegionDescStorage {
  RegionOpDesc ops[xts3::kMaxRegionOps];
  uint32_t height[xts3::kMaxRegionTensors];
  void Attach(RegionDesc* d) {
    d->ops = ops;
    d->height = height;
  }
};

inline uint32_t OutputTensor(const RegionDesc& d) { return d.ops[d.num_ops - 1].out; }
inline uint32_t OutputHeight(const RegionDesc& d) { return d.height[OutputTensor(d)]; }

inline uint32_t NumBands(const RegionDesc& d, uint32_t band_rows) {
  return (OutputHeight(d) + band_rows - 1) / band_rows;
}

inline RowRange BandRows(const RegionDesc& d, uint32_t band_rows, uint32_t k) {
  const uint32_t h = OutputHeight(d);
  const uint64_t lo = (uint64_t)k * band_rows, hi = lo + band_rows;
  return {lo < h ? (uint32_t)lo : h, hi < h ? (uint32_t)hi : h};
}

// need[t] = the rows of every tensor band k reads or writes (the output's
// are the band's rows). Backwards over the ops: an op's inputs are needed
// for the rows its output is needed for.
inline void BandNeeds(const RegionDesc& d, uint32_t band_rows, uint32_t k,
                      RowRange need[xts3::kMaxRegionTensors]) {
  for (uint32_t t = 0; t < d.num_tensors; ++t) need[t] = {0, 0};
  need[OutputTensor(d)] = BandRows(d, band_rows, k);
  for (uint32_t i = d.num_ops; i-- > 0;) {
    const RegionOpDesc& op = d.ops[i];
    for (uint32_t j = 0; j < op.num_inputs; ++j)
      need[op.in[j]] = Hull(need[op.in[j]], InputRows(op.window[j], d.height[op.in[j]], need[op.out]));
  }
}

// Rows of the region output computed but not yet written back when an
// IN_PLACE region has finished band k: those its input still needs later,
// i.e. [flushed_k, band end) with flushed_k = min(band end, the input's
// first row needed by band k+1) (all of them after the last band).
inline uint32_t FlushedAfter(const RegionDesc& d, uint32_t band_rows, uint32_t k,
                             const RowRange next_need[xts3::kMaxRegionTensors]) {
  const RowRange band = BandRows(d, band_rows, k);
  if (k + 1 >= NumBands(d, band_rows)) return band.hi;
  const RowRange next = next_need[d.in_place_input];
  const uint32_t bound = next.empty() ? band.hi : next.lo;
  return bound < band.hi ? bound : band.hi;
}

// What a region needs at a band height: capacity[t] = the most rows of t
// any band holds (buffer rows of a BANDED tensor), staging_rows = the most
// output rows an IN_PLACE region holds before writing them back, and
// computed[i] = rows op i computes over all bands (= its output height:
// nothing is recomputed; kept to prove it).
struct RegionPlan {
  uint32_t capacity[xts3::kMaxRegionTensors];
  uint32_t staging_rows;
  uint32_t computed[xts3::kMaxRegionOps];
  uint32_t num_bands;
};

inline void PlanRegion(const RegionDesc& d, uint32_t band_rows, RegionPlan* plan) {
  for (uint32_t t = 0; t < d.num_tensors; ++t) plan->capacity[t] = 0;
  for (uint32_t i = 0; i < d.num_ops; ++i) plan->computed[i] = 0;
  plan->staging_rows = 0;
  plan->num_bands = NumBands(d, band_rows);
  RowRange have[xts3::kMaxRegionTensors], need[xts3::kMaxRegionTensors],
      next[xts3::kMaxRegionTensors];
  for (uint32_t t = 0; t < d.num_tensors; ++t) have[t] = {0, 0};
  uint32_t flushed = 0;
  if (plan->num_bands > 0) BandNeeds(d, band_rows, 0, next);
  for (uint32_t k = 0; k < plan->num_bands; ++k) {
    for (uint32_t t = 0; t < d.num_tensors; ++t) need[t] = next[t];
    if (k + 1 < plan->num_bands) BandNeeds(d, band_rows, k + 1, next);
    for (uint32_t t = 0; t < d.num_tensors; ++t)
      if (need[t].size() > plan->capacity[t]) plan->capacity[t] = need[t].size();
    for (uint32_t i = 0; i < d.num_ops; ++i) {
      const uint32_t o = d.ops[i].out;
      const uint32_t from = have[o].hi > need[o].lo ? have[o].hi : need[o].lo;
      if (need[o].hi > from) plan->computed[i] += need[o].hi - from;
      have[o] = need[o];
    }
    if (d.in_place_input < d.num_tensors) {
      const uint32_t staged = BandRows(d, band_rows, k).hi - flushed;
      if (staged > plan->staging_rows) plan->staging_rows = staged;
      flushed = FlushedAfter(d, band_rows, k, next);
    }
  }
}

// How an op reads rows, if it can run on bands: its row-mapped input slots
// (input 0, and input 1 of ADD and CONCAT) with their windows, and the index of the
// parameter word holding its top pad (-1: none). False for any other op.
struct OpBandSupport {
  uint32_t num_inputs;
  uint32_t slot[kMaxRegionOpRowInputs];
  RowWindow window[kMaxRegionOpRowInputs];
  int32_t pad_word;
};
// (Defined in src/ops/band_loop.cpp, next to the region's execution.)
bool DescribeOp(const Model& m, const OpInfo& op, OpBandSupport* out);

// A fused region described on local tensor indices: `tensors[local]` is
// the Model's tensor, `pad_word[i]` where op i's top pad sits in its params
// (OpBandSupport::pad_word). The arrays point into a RegionStorage while a
// region is checked, and into the interpreter's persistent memory once
// Interpreter::Init described it for good (DescribeRegions, FindRegion).
struct Region {
  uint32_t loop;  // the BAND_LOOP op (kNotInRegion for a candidate)
  uint32_t first_op, num_ops, band_rows;
  bool in_place;
  uint16_t staging;  // the BAND_LOOP's output (kNoTensor when not in place)
  RegionDesc desc;
  uint16_t* tensors;  // [desc.num_tensors]
  bool* produced;     // [desc.num_tensors]: written by a region op
  int8_t* pad_word;   // [num_ops]
};

// Room for the arrays of any region the format allows (kMaxRegionOps ops,
// kMaxRegionTensors tensors).
struct RegionStorage {
  RegionDescStorage desc;
  uint16_t tensors[xts3::kMaxRegionTensors];
  bool produced[xts3::kMaxRegionTensors];
  int8_t pad_word[xts3::kMaxRegionOps];
  void Attach(Region* r) {
    desc.Attach(&r->desc);
    r->tensors = tensors;
    r->produced = produced;
    r->pad_word = pad_word;
  }
};

// The planner's question, asked through the binding before any BAND_LOOP
// exists: would ops first .. first+num-1 of `m` (none of them in a region)
// pass the parser as a region, with a BAND_LOOP in front and the outputs of
// all but the last op BANDED? The same checks as DescribeRegion and
// CheckRegions run on that hypothesis; IN_PLACE adds the shape check.
Status DescribeCandidate(const Model& m, uint32_t first, uint32_t num, bool in_place, Region* r);

// The persistent bytes Interpreter::Init keeps for a region of num_ops ops
// and num_tensors tensors (src/ops/band_loop.h DescribeRegions).
uint32_t PerRegionBytes(uint32_t num_ops, uint32_t num_tensors);

}  // namespace band
}  // namespace espnn
