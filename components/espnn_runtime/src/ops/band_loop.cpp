// BAND_LOOP: a fused region, executed band by band (xts3_format.h,
// espnn/band_geometry.h for the row arithmetic, docs/xts3-format.md §6 BAND_LOOP).
//
// Each band runs the region's ops in order, each on the rows that band needs
// and no earlier band computed. An op runs through its ordinary eval() with
// an EvalContext whose views make its row-mapped tensors bands (a smaller
// image) and with its top pad rewritten for the band: so the kernel, its
// ESP-NN routing (S3 pad and scratch defects are judged on the band's own
// geometry) and its arithmetic are the ones of the whole-tensor path, and
// the result is bit-identical. Padding exists only at the true image border:
// interior bands read real halo rows instead.
//
// Scratch: ComputeMemoryRequirements sizes each op's ESP-NN scratch for its
// whole tensors; a band is the same op on fewer rows with at most the same
// pads, and ESP-NN's scratch sizes grow with the image, so that covers every
// band (on the host's ANSI stand-in the scratch is 0 anyway).
//
// Description: the region rules are stated once, in DescribeRegionOps and
// the checks beside it. The parser runs them on every BAND_LOOP
// (CheckRegions), the Python planner on a candidate run of ops before any
// BAND_LOOP exists (DescribeCandidate, through the binding), and
// Interpreter::Init once more to keep each region's description in its
// persistent memory (DescribeRegions); EvalBandLoop only reads that.
//
// Buffers: a region input is a full tensor; a BANDED tensor is a buffer of
// `capacity` rows holding rows [lo, hi) of the tensor (row lo first); when
// the next band needs rows [lo', hi'), rows [lo', hi) are moved to the front
// and only [max(lo', hi), hi') are computed. The region output is a full
// tensor, written band by band; IN_PLACE: it occupies its input's bytes, and
// each band's rows wait in the staging buffer until no later band reads the
// input rows they overwrite.
#include "ops/band_loop.h"

#include <stddef.h>
#include <string.h>

#include "ops/op_util.h"

namespace espnn {
namespace band {

using namespace xts3;

namespace {

constexpr RowWindow kElementwise = {1, 0, 1, 1};

// The params of the ops with a top pad (DescribeOp), copied per band with
// the band's pad; the parser checked params_count against these structs.
constexpr uint32_t kMaxBandParams = 16;
static_assert(sizeof(CONV2D_Params) <= 4 * kMaxBandParams &&
                  sizeof(DEPTHWISE_CONV2D_Params) <= 4 * kMaxBandParams &&
                  sizeof(AVG_POOL2D_Params) <= 4 * kMaxBandParams &&
                  sizeof(MAX_POOL2D_Params) <= 4 * kMaxBandParams &&
                  sizeof(TRANSPOSE_CONV2D_Params) <= 4 * kMaxBandParams,
              "a band's params fit its copy");

// Offset of a field in a params struct, in parameter words.
#define ESPNN_PARAM_WORD(Struct, field) ((int32_t)(offsetof(Struct, field) / 4))

bool IsImage(const TensorInfo& t) {
  return t.dtype == DType::INT8 && t.rank == 4 && t.dims[0] == 1;
}

uint32_t RowBytes(const TensorInfo& t) { return t.dims[2] * t.dims[3]; }

// A conv/depthwise window on rows. validate() bounds stride, pad and
// dilation by 65535 but lets the extent dil*(k-1)+1 reach 2^32; a region
// takes windows up to 65535 rows so all band arithmetic stays in int32.
bool ConvWindow(int32_t stride, int32_t pad, int32_t dilation, uint32_t k, RowWindow* w) {
  const int64_t extent = (int64_t)dilation * ((int64_t)k - 1) + 1;
  if (extent > (int64_t)kMaxKernelDim) return false;
  *w = {stride, pad, (uint16_t)extent, 1};
  return true;
}

// TRANSPOSE_CONV2D on rows: input row i feeds output rows i*stride - pad +
// ky*dil, so output row r reads the rows i with r + pad - (ext - 1) <=
// i*stride <= r + pad (ext = dil*(kh-1)+1): i from ceil((r + pad - ext +
// 1) / stride) = floor((r - (ext - pad - stride)) / stride), and at most
// ceil((ext - stride) / stride) + 1 of them. A window of stride 1/stride.
// Taken only when ext >= stride and the first and last output rows read
// an image row: then every output row does (the windows are monotone), so
// a band never needs an empty range of rows, which the band loop's
// row bookkeeping assumes. That leaves out output_padding rows past the
// last input row; the 2x2 stride-2 upsampling of a U-Net has none.
bool TransposedWindow(const TRANSPOSE_CONV2D_Params& p, uint32_t k, uint32_t in_h, uint32_t out_h,
                      RowWindow* w) {
  const int64_t ext = (int64_t)p.dilation_h * ((int64_t)k - 1) + 1;
  if (ext > (int64_t)kMaxKernelDim || p.stride_h > (int32_t)kMaxKernelDim || ext < p.stride_h) return false;
  const int64_t c = ext - p.stride_h;
  *w = {1, (int32_t)(ext - p.pad_top - p.stride_h), (uint16_t)((c + p.stride_h - 1) / p.stride_h + 1),
        (uint16_t)p.stride_h};
  return !InputRows(*w, in_h, {0, 1}).empty() && !InputRows(*w, in_h, {out_h - 1, out_h}).empty();
}

uint32_t Gcd(uint32_t a, uint32_t b) {
  while (b != 0) {
    const uint32_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// RESIZE_NEAREST (taps 1) / RESIZE_BILINEAR (taps 2): output row r reads the
// input rows of its table row (both bilinear taps, a zero weight included:
// the kernel reads both). The window has the stride in_h/out_h in lowest
// terms, the least pad that puts lo(r) at or below every row r reads, and
// the least extent that reaches them all. validate() checked the table; one
// whose rows stray far from r*in_h/out_h only gets a wide window (refused
// beyond 65535 rows).
bool TableWindow(const Model& m, const OpInfo& op, uint32_t taps, RowWindow* w) {
  const TensorInfo in = m.tensor(op.inputs[0]), out = m.tensor(op.outputs[0]);
  const uint8_t* table = m.constant_data(m.tensor(op.inputs[1]));
  const uint32_t row = taps == 1 ? 1 : 3;  // entries per table row (resize.cpp)
  const uint32_t g = Gcd(in.dims[1], out.dims[1]);
  const int64_t stride = in.dims[1] / g, den = out.dims[1] / g;
  if (stride > (int64_t)kMaxKernelDim || den > (int64_t)kMaxKernelDim) return false;
  int64_t pad = INT64_MIN;
  for (uint32_t r = 0; r < out.dims[1]; ++r) {
    int64_t lowest = ops::LoadI32(table, r * row);
    for (uint32_t k = 1; k < taps; ++k)
      if (ops::LoadI32(table, r * row + k) < lowest) lowest = ops::LoadI32(table, r * row + k);
    // floor((r*stride - pad) / den) <= lowest  <=>  pad >= r*stride - (lowest+1)*den + 1
    const int64_t need = (int64_t)r * stride - (lowest + 1) * den + 1;
    if (need > pad) pad = need;
  }
  if (pad < INT32_MIN || pad > INT32_MAX) return false;
  int64_t extent = 1;
  for (uint32_t r = 0; r < out.dims[1]; ++r) {
    const int64_t lo = FloorDiv((int64_t)r * stride - pad, den);
    for (uint32_t k = 0; k < taps; ++k)
      if (ops::LoadI32(table, r * row + k) - lo + 1 > extent) extent = ops::LoadI32(table, r * row + k) - lo + 1;
  }
  if (extent > (int64_t)kMaxKernelDim) return false;
  *w = {(int32_t)stride, (int32_t)pad, (uint16_t)extent, (uint16_t)den};
  return true;
}

// The squeeze-excite scale x * s (or s * x): the map x [1,H,W,C] and the
// channel vector s ([1,1,1,C] or [C]), which every band reads whole like a
// filter (CheckWholeInputs). Row r of the output is row r of x times s, so
// the op is elementwise on rows of x. The input slot of the map, or -1.
int32_t ChannelScaleMap(const Model& m, const OpInfo& op) {
  const TensorInfo y = m.tensor(op.outputs[0]);
  for (uint32_t k = 0; k < 2; ++k) {
    const TensorInfo x = m.tensor(op.inputs[k]), s = m.tensor(op.inputs[1 - k]);
    const uint32_t c = IsImage(x) ? x.dims[3] : 0;
    const bool vector = (s.rank == 4 && s.dims[0] == 1 && s.dims[1] == 1 && s.dims[2] == 1 && s.dims[3] == c) ||
                        (s.rank == 1 && s.dims[0] == c);
    if (c > 0 && vector && x.same_shape(y)) return (int32_t)k;
  }
  return -1;
}

}  // namespace

bool DescribeOp(const Model& m, const OpInfo& op, OpBandSupport* out) {
  out->num_inputs = 1;
  out->slot[0] = 0;
  out->window[0] = kElementwise;
  out->pad_word = -1;
  switch (op.opcode) {
    case Opcode::CONV2D: {
      const auto p = op.Params<CONV2D_Params>();
      const TensorInfo f = m.tensor(op.inputs[1]);
      out->pad_word = ESPNN_PARAM_WORD(CONV2D_Params, pad_top);
      return ConvWindow(p.stride_h, p.pad_top, p.dilation_h, f.dims[1], &out->window[0]);
    }
    case Opcode::DEPTHWISE_CONV2D: {
      const auto p = op.Params<DEPTHWISE_CONV2D_Params>();
      const TensorInfo f = m.tensor(op.inputs[1]);
      out->pad_word = ESPNN_PARAM_WORD(DEPTHWISE_CONV2D_Params, pad_top);
      return ConvWindow(p.stride_h, p.pad_top, p.dilation_h, f.dims[1], &out->window[0]);
    }
    case Opcode::AVG_POOL2D:
    case Opcode::MAX_POOL2D: {
      // Windows are clipped to the image, and a band holds every image row
      // its windows touch: the same taps as on the whole image.
      const auto p = op.Params<AVG_POOL2D_Params>();  // MAX_POOL2D has the same fields
      out->pad_word = ESPNN_PARAM_WORD(AVG_POOL2D_Params, pad_top);
      return p.kernel_h >= 1 && ConvWindow(p.stride_h, p.pad_top, 1, (uint32_t)p.kernel_h, &out->window[0]);
    }
    case Opcode::ADD: {
      // Both operands row by row: only without broadcasting.
      const TensorInfo a = m.tensor(op.inputs[0]), b = m.tensor(op.inputs[1]);
      if (!a.same_shape(b)) return false;
      out->num_inputs = 2;
      out->slot[1] = 1;
      out->window[1] = kElementwise;
      return true;
    }
    case Opcode::MUL: {
      const int32_t map = ChannelScaleMap(m, op);
      out->slot[0] = map < 0 ? 0u : (uint32_t)map;
      return map >= 0;
    }
    case Opcode::LUT:
    case Opcode::HARD_SWISH:
    case Opcode::REQUANTIZE:
      return true;
    case Opcode::TRANSPOSE_CONV2D: {
      const auto p = op.Params<TRANSPOSE_CONV2D_Params>();
      out->pad_word = ESPNN_PARAM_WORD(TRANSPOSE_CONV2D_Params, pad_top);
      return TransposedWindow(p, m.tensor(op.inputs[1]).dims[1], m.tensor(op.inputs[0]).dims[1],
                              m.tensor(op.outputs[0]).dims[1], &out->window[0]);
    }
    case Opcode::RESIZE_NEAREST:
      return TableWindow(m, op, 1, &out->window[0]);
    case Opcode::RESIZE_BILINEAR:
      return TableWindow(m, op, 2, &out->window[0]);
    case Opcode::CONCAT:
      // Channels of two images of the same rows: output row r is row r of
      // both inputs, side by side.
      if (op.num_inputs != kMaxRegionOpRowInputs || op.Params<CONCAT_Params>().axis != 3) return false;
      out->num_inputs = 2;
      out->slot[1] = 1;
      out->window[1] = kElementwise;
      return true;
    default:
      return false;
  }
}

uint32_t EnclosingLoop(const Model& m, uint32_t index) {
  // A region holds at most kMaxRegionOps ops, so its BAND_LOOP is close.
  for (uint32_t back = 1; back <= kMaxRegionOps + 1 && back <= index; ++back) {
    const OpInfo loop = m.op(index - back);
    if (loop.opcode != Opcode::BAND_LOOP) continue;
    const auto p = loop.Params<BAND_LOOP_Params>();
    return (uint32_t)p.num_ops >= back ? index - back : kNotInRegion;
  }
  return kNotInRegion;
}

bool WritesThroughStaging(const Model& m, const OpInfo& op) {
  const uint32_t loop = EnclosingLoop(m, op.index);
  if (loop == kNotInRegion) return false;
  const auto p = m.op(loop).Params<BAND_LOOP_Params>();
  return (p.flags & kBandFlagInPlace) != 0 && loop + (uint32_t)p.num_ops == op.index;
}

namespace {

// Local index of model tensor t in the region, added when new.
Status LocalTensor(Region* r, uint16_t t, uint32_t* local) {
  for (uint32_t i = 0; i < r->desc.num_tensors; ++i)
    if (r->tensors[i] == t) {
      *local = i;
      return Status::Ok();
    }
  if (r->desc.num_tensors >= kMaxRegionTensors)
    return ops::Fail("more than %u tensors", (unsigned)kMaxRegionTensors);
  *local = r->desc.num_tensors++;
  r->tensors[*local] = t;
  r->produced[*local] = false;
  return Status::Ok();
}

// Which tensors are BANDED: in a blob, those with the flag; for a candidate
// region (DescribeCandidate), the outputs of all but its last op, as the
// writer would flag them. Every rule below asks this, never the flag.
struct Banded {
  const Model& m;
  bool candidate = false;
  uint32_t num = 0;
  uint16_t outputs[kMaxRegionOps];  // a candidate's: of all but its last op

  explicit Banded(const Model& model) : m(model) {}
  Banded(const Model& model, uint32_t first, uint32_t n) : m(model), candidate(true) {
    for (uint32_t i = first; i + 1 < first + n; ++i) outputs[num++] = m.op(i).outputs[0];
  }
  bool operator()(uint16_t t) const {
    if (!candidate) return (m.tensor(t).flags & kTensorFlagBanded) != 0;
    for (uint32_t i = 0; i < num; ++i)
      if (outputs[i] == t) return true;
    return false;
  }
};

// The inputs of region op `op` that are not row-mapped (filters, LUT
// tables, a channel scale) are read whole by every band: so they are
// written before the region, never BANDED nor by a region op.
Status CheckWholeInputs(const Model& m, const Banded& is_banded, const Region& r, const OpInfo& op,
                        const OpBandSupport& s) {
  for (uint32_t k = 0; k < op.num_inputs; ++k) {
    bool row = false;
    for (uint32_t j = 0; j < s.num_inputs; ++j) row = row || s.slot[j] == k;
    const uint16_t t = op.inputs[k];
    if (row || t == kNoTensor || m.tensor(t).memory != Memory::ARENA) continue;
    bool written = is_banded(t);
    for (uint32_t i = 0; i < r.num_ops && !written; ++i) written = m.op(r.first_op + i).outputs[0] == t;
    if (written)
      return ops::Fail("op %u input %u (tensor %u) is read whole by every band, so it must be "
                       "written before the region", (unsigned)op.index, (unsigned)k, (unsigned)t);
  }
  return Status::Ok();
}

Status DescribeRegionOps(const Model& m, const Banded& is_banded, Region* r) {
  for (uint32_t i = 0; i < r->num_ops; ++i) {
    const OpInfo op = m.op(r->first_op + i);
    OpBandSupport s;
    if (op.opcode == Opcode::BAND_LOOP || !DescribeOp(m, op, &s))
      return ops::Fail("op %u (%s) cannot run in a fused region", (unsigned)op.index,
                       OpcodeName(op.opcode));
    ESPNN_RETURN_IF_ERROR(CheckWholeInputs(m, is_banded, *r, op, s));
    r->pad_word[i] = (int8_t)s.pad_word;
    RegionOpDesc& d = r->desc.ops[i];
    d.num_inputs = s.num_inputs;
    for (uint32_t j = 0; j < s.num_inputs; ++j) {
      const uint16_t t = op.inputs[s.slot[j]];
      const TensorInfo ti = m.tensor(t);
      if (ti.memory != Memory::ARENA || !IsImage(ti))
        return ops::Fail("op %u input %u (tensor %u) must be an int8 [1,H,W,C] arena tensor",
                         (unsigned)op.index, (unsigned)s.slot[j], (unsigned)t);
      ESPNN_RETURN_IF_ERROR(LocalTensor(r, t, &d.in[j]));
      const bool banded = is_banded(t);
      if (banded != r->produced[d.in[j]])
        return ops::Fail("op %u input %u (tensor %u): %s", (unsigned)op.index,
                         (unsigned)s.slot[j], (unsigned)t,
                         banded ? "a BANDED tensor not written earlier in this region"
                                : "written in this region but not BANDED");
      d.window[j] = s.window[j];
      r->desc.height[d.in[j]] = ti.dims[1];
    }
    const uint16_t o = op.outputs[0];
    const TensorInfo to = m.tensor(o);
    if (!IsImage(to))
      return ops::Fail("op %u output (tensor %u) must be an int8 [1,H,W,C] tensor",
                       (unsigned)op.index, (unsigned)o);
    const bool last = i + 1 == r->num_ops;
    const bool banded = is_banded(o);
    if (banded == last)
      return ops::Fail("op %u output (tensor %u) %s", (unsigned)op.index, (unsigned)o,
                       last ? "is the region output and must not be BANDED"
                            : "must be BANDED (only the last op writes a whole tensor)");
    ESPNN_RETURN_IF_ERROR(LocalTensor(r, o, &d.out));
    r->produced[d.out] = true;
    r->desc.height[d.out] = to.dims[1];
  }
  // Every BANDED tensor is read by a later op of the region (otherwise no
  // band would ever need its rows).
  for (uint32_t i = 0; i + 1 < r->num_ops; ++i) {
    bool read = false;
    for (uint32_t k = i + 1; k < r->num_ops && !read; ++k)
      for (uint32_t j = 0; j < r->desc.ops[k].num_inputs; ++j)
        read = read || r->desc.ops[k].in[j] == r->desc.ops[i].out;
    if (!read)
      return ops::Fail("op %u output (tensor %u) is read by no later op of the region",
                       (unsigned)(r->first_op + i), (unsigned)r->tensors[r->desc.ops[i].out]);
  }
  r->desc.in_place_input = r->in_place ? r->desc.ops[0].in[0]  // from before the region
                                       : r->desc.num_tensors;
  return Status::Ok();
}

// Outside a region nothing reads or writes a BANDED tensor.
Status CheckOutsideUse(const Banded& is_banded, const OpInfo& op) {
  for (uint32_t k = 0; k < op.num_inputs + op.num_outputs; ++k) {
    const uint16_t t = k < op.num_inputs ? op.inputs[k] : op.outputs[k - op.num_inputs];
    if (t != kNoTensor && is_banded(t))
      return ops::Fail("op %u (%s) uses BANDED tensor %u outside a fused region",
                       (unsigned)op.index, OpcodeName(op.opcode), (unsigned)t);
  }
  return Status::Ok();
}

// No graph input or output is BANDED.
Status CheckGraphIo(const Model& m, const Banded& is_banded) {
  for (uint32_t i = 0; i < m.num_inputs() + m.num_outputs(); ++i) {
    const uint16_t t = i < m.num_inputs() ? m.input(i) : m.output(i - m.num_inputs());
    if (is_banded(t))
      return ops::Fail("graph %s tensor %u is BANDED", i < m.num_inputs() ? "input" : "output",
                       (unsigned)t);
  }
  return Status::Ok();
}

// IN_PLACE: the output takes its input's place, row r of the output at
// byte r * (its row bytes) of the input. It has the input's rows and rows
// no wider (the squeeze-excite scale and projection narrow C_exp to C_out):
// then the output rows [0, f) end at or before input row f, so writing them
// once no later band reads an input row below f (FlushedAfter) overwrites
// nothing still needed.
bool FitsInPlace(const TensorInfo& x, const TensorInfo& y) {
  return x.same_shape(y) || (IsImage(x) && IsImage(y) && x.dims[1] == y.dims[1] &&
                             RowBytes(y) <= RowBytes(x));
}

Status CheckInPlaceShape(const Model& m, const Region& r) {
  // The arena check (parser.cpp) and the planner take input 0 of the first
  // op as the bytes the output replaces: so must the band loop.
  if (m.op(r.first_op).inputs[0] != r.tensors[r.desc.in_place_input])
    return ops::Fail("IN_PLACE: the region input (tensor %u) must be input 0 of op %u",
                     (unsigned)r.tensors[r.desc.in_place_input], (unsigned)r.first_op);
  const TensorInfo x = m.tensor(r.tensors[r.desc.in_place_input]);
  const TensorInfo y = m.tensor(r.tensors[OutputTensor(r.desc)]);
  if (!FitsInPlace(x, y))
    return ops::Fail("IN_PLACE: the output (tensor %u) must have the shape of the region input "
                     "(tensor %u), or its rows each no wider",
                     (unsigned)r.tensors[OutputTensor(r.desc)], (unsigned)r.tensors[r.desc.in_place_input]);
  return Status::Ok();
}

Status CheckCapacities(const Model& m, const Region& r, const RegionPlan& plan) {
  for (uint32_t t = 0; t < r.desc.num_tensors; ++t) {
    if (!r.produced[t] || t == OutputTensor(r.desc)) continue;
    const TensorInfo ti = m.tensor(r.tensors[t]);
    const uint32_t rows = ti.nbytes / RowBytes(ti);  // the record check made it exact
    if (rows < plan.capacity[t])
      return ops::Fail("BANDED tensor %u holds %u rows, band_rows %u needs %u",
                       (unsigned)r.tensors[t], (unsigned)rows, (unsigned)r.band_rows,
                       (unsigned)plan.capacity[t]);
  }
  return Status::Ok();
}

Status CheckInPlace(const Model& m, const Region& r, const OpInfo& loop, const RegionPlan& plan) {
  if (!r.in_place) {
    if (loop.num_outputs != 0)
      return ops::Fail("a staging output is only for an IN_PLACE region");
    return Status::Ok();
  }
  ESPNN_RETURN_IF_ERROR(CheckInPlaceShape(m, r));
  const TensorInfo x = m.tensor(r.tensors[r.desc.in_place_input]);
  const TensorInfo y = m.tensor(r.tensors[OutputTensor(r.desc)]);
  if (x.offset != y.offset)
    return ops::Fail("IN_PLACE: the output (tensor %u, arena offset %u) must sit on the region "
                     "input (tensor %u, arena offset %u)",
                     (unsigned)r.tensors[OutputTensor(r.desc)], (unsigned)y.offset,
                     (unsigned)r.tensors[r.desc.in_place_input], (unsigned)x.offset);
  if (loop.num_outputs != 1) return ops::Fail("IN_PLACE needs the staging output");
  const TensorInfo s = m.tensor(r.staging);
  if (s.dtype != DType::INT8 || s.rank != 2 || s.dims[1] != RowBytes(y) ||
      (m.tensor(r.staging).flags & kTensorFlagBanded) != 0)
    return ops::Fail("staging (tensor %u) must be int8 [rows, %u] (rows of the output)",
                     (unsigned)r.staging, (unsigned)RowBytes(y));
  if (s.dims[0] < plan.staging_rows)
    return ops::Fail("staging (tensor %u) holds %u rows, band_rows %u needs %u",
                     (unsigned)r.staging, (unsigned)s.dims[0], (unsigned)r.band_rows,
                     (unsigned)plan.staging_rows);
  return Status::Ok();
}

}  // namespace

Status DescribeRegion(const Model& m, uint32_t loop_index, Region* r) {
  const OpInfo loop = m.op(loop_index);
  const auto p = loop.Params<BAND_LOOP_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.num_ops, "num_ops", 1, (int32_t)kMaxRegionOps));
  // loop_index < kMaxOps and num_ops <= kMaxRegionOps: no overflow.
  if (loop_index + (uint32_t)p.num_ops >= m.num_ops())
    return ops::Fail("num_ops = %d runs past the last op", (int)p.num_ops);
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.band_rows, "band_rows", 1, (int32_t)kMaxDim));
  if ((p.flags & ~kBandFlagsKnown) != 0)
    return ops::Fail("flags = 0x%x has unknown bits", (unsigned)p.flags);
  r->loop = loop_index;
  r->first_op = loop_index + 1;
  r->num_ops = (uint32_t)p.num_ops;
  r->band_rows = (uint32_t)p.band_rows;
  r->in_place = (p.flags & kBandFlagInPlace) != 0;
  r->staging = loop.num_outputs == 1 ? loop.outputs[0] : kNoTensor;
  r->desc.num_ops = r->num_ops;
  r->desc.num_tensors = 0;
  return DescribeRegionOps(m, Banded(m), r);
}

uint32_t MaxCallRows(const Model& m, uint32_t index) {
  const uint32_t loop = EnclosingLoop(m, index);
  if (loop == kNotInRegion) return 0;
  Region r;
  RegionStorage storage;
  storage.Attach(&r);
  if (!DescribeRegion(m, loop, &r).ok()) return 0;
  RegionPlan plan;
  PlanRegion(r.desc, r.band_rows, &plan);
  // A call computes rows [from, want.hi) of its output, a subrange of the
  // rows the band wants, which PlanRegion's capacity bounds (EvalBandLoop).
  return plan.capacity[r.desc.ops[index - r.first_op].out];
}

Status DescribeCandidate(const Model& m, uint32_t first, uint32_t num, bool in_place, Region* r) {
  if (num < 1 || num > kMaxRegionOps)
    return ops::Fail("num_ops = %u out of range [1, %u]", (unsigned)num, (unsigned)kMaxRegionOps);
  if (first >= m.num_ops() || num > m.num_ops() - first)
    return ops::Fail("ops %u..%u run past the last op", (unsigned)first, (unsigned)(first + num - 1));
  const Banded is_banded(m, first, num);  // (num checked above)
  r->loop = kNotInRegion;
  r->first_op = first;
  r->num_ops = num;
  r->band_rows = 1;
  r->in_place = in_place;
  r->staging = kNoTensor;
  r->desc.num_ops = num;
  r->desc.num_tensors = 0;
  ESPNN_RETURN_IF_ERROR(DescribeRegionOps(m, is_banded, r));
  if (in_place) ESPNN_RETURN_IF_ERROR(CheckInPlaceShape(m, *r));
  for (uint32_t i = 0; i < m.num_ops(); ++i)
    if (i < first || i >= first + num) ESPNN_RETURN_IF_ERROR(CheckOutsideUse(is_banded, m.op(i)));
  return CheckGraphIo(m, is_banded);
}

Status CheckRegions(const Model& m) {
  const Banded by_flag(m);
  for (uint32_t i = 0; i < m.num_ops(); ++i) {
    const OpInfo op = m.op(i);
    if (op.opcode == Opcode::BAND_LOOP) {
      Region r;
      RegionStorage storage;
      storage.Attach(&r);
      Status s = DescribeRegion(m, i, &r);
      RegionPlan plan;
      if (s.ok()) {
        PlanRegion(r.desc, r.band_rows, &plan);
        s = CheckCapacities(m, r, plan);
      }
      if (s.ok()) s = CheckInPlace(m, r, op, plan);
      if (!s.ok()) return s.Prefix("fused region at op %u", (unsigned)i);
      i += r.num_ops;  // regions do not nest (DescribeRegionOps refused a BAND_LOOP)
      continue;
    }
    ESPNN_RETURN_IF_ERROR(CheckOutsideUse(by_flag, op));
  }
  return CheckGraphIo(m, by_flag);
}

// ------------------------------------------------------------------ persistent data

namespace {

// A region's record in persistent memory; its arrays follow the records,
// at `arrays` bytes from the start of that memory.
struct RegionRecord {
  uint32_t loop, first_op, num_ops, band_rows, num_tensors, in_place_input, arrays;
  uint16_t staging;
  uint8_t in_place, reserved;
};
static_assert(sizeof(RegionRecord) == 32, "docs/performance.md states 32 bytes per region record");
static_assert(sizeof(RegionOpDesc) == 40, "docs/performance.md states 40 bytes per region op");

uint32_t Align(uint32_t n, uint32_t a) { return (n + a - 1) / a * a; }

// The arrays of a region with n ops and t tensors: ops, height, tensors,
// produced, pad_word (each aligned to its element: the sizes keep it so).
uint32_t ArrayBytes(uint32_t n, uint32_t t) {
  return Align(n * (uint32_t)sizeof(RegionOpDesc) + t * (uint32_t)(sizeof(uint32_t) + sizeof(uint16_t) +
                                                                   sizeof(bool)) + n,
               kPersistentAlignment);
}

// Points r's arrays at `mem`, laid out as ArrayBytes counts them.
void AttachArrays(uint8_t* mem, uint32_t n, uint32_t t, Region* r) {
  r->desc.ops = (RegionOpDesc*)mem;
  mem += n * sizeof(RegionOpDesc);
  r->desc.height = (uint32_t*)mem;
  mem += t * sizeof(uint32_t);
  r->tensors = (uint16_t*)mem;
  mem += t * sizeof(uint16_t);
  r->produced = (bool*)mem;
  mem += t * sizeof(bool);
  r->pad_word = (int8_t*)mem;
}

}  // namespace

uint32_t PerRegionBytes(uint32_t num_ops, uint32_t num_tensors) {
  return (uint32_t)sizeof(RegionRecord) + ArrayBytes(num_ops, num_tensors);
}

uint32_t RegionsBytes(const Model& m) {
  uint32_t bytes = 0;
  for (uint32_t i = 0; i < m.num_ops(); ++i) {
    if (m.op(i).opcode != Opcode::BAND_LOOP) continue;
    Region r;
    RegionStorage storage;
    storage.Attach(&r);
    if (!DescribeRegion(m, i, &r).ok()) return 0;  // not a parsed model: Init refuses it
    bytes += PerRegionBytes(r.num_ops, r.desc.num_tensors);
    i += r.num_ops;
  }
  return bytes;
}

Status DescribeRegions(const Model& m, void* mem, uint32_t bytes, uint32_t* count) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < m.num_ops(); ++i)
    if (m.op(i).opcode == Opcode::BAND_LOOP) ++n;  // regions do not nest (CheckRegions)
  RegionRecord* records = (RegionRecord*)mem;
  uint32_t used = n * (uint32_t)sizeof(RegionRecord), k = 0;
  for (uint32_t i = 0; i < m.num_ops() && k < n; ++i) {
    if (m.op(i).opcode != Opcode::BAND_LOOP) continue;
    Region r;
    RegionStorage storage;
    storage.Attach(&r);
    ESPNN_RETURN_IF_ERROR(DescribeRegion(m, i, &r));
    const uint32_t nops = r.num_ops, nt = r.desc.num_tensors;
    if (used + ArrayBytes(nops, nt) > bytes)
      return Status::Error(StatusCode::kInvalidArgument,
                           "init: the fused regions need more than %u bytes", (unsigned)bytes);
    records[k++] = {r.loop, r.first_op, nops, r.band_rows, nt, r.desc.in_place_input, used,
                    r.staging, (uint8_t)r.in_place, 0};
    Region saved;
    AttachArrays((uint8_t*)mem + used, nops, nt, &saved);
    memcpy(saved.desc.ops, r.desc.ops, nops * sizeof(RegionOpDesc));
    memcpy(saved.desc.height, r.desc.height, nt * sizeof(uint32_t));
    memcpy(saved.tensors, r.tensors, nt * sizeof(uint16_t));
    memcpy(saved.produced, r.produced, nt * sizeof(bool));
    memcpy(saved.pad_word, r.pad_word, nops);
    used += ArrayBytes(nops, nt);
    i += r.num_ops;
  }
  *count = k;
  return Status::Ok();
}

bool FindRegion(const void* mem, uint32_t count, uint32_t loop, Region* r) {
  const RegionRecord* records = (const RegionRecord*)mem;
  uint32_t lo = 0, hi = count;  // binary search: records are in op order
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (records[mid].loop < loop)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo >= count || records[lo].loop != loop) return false;
  const RegionRecord& rec = records[lo];
  r->loop = rec.loop;
  r->first_op = rec.first_op;
  r->num_ops = rec.num_ops;
  r->band_rows = rec.band_rows;
  r->in_place = rec.in_place != 0;
  r->staging = rec.staging;
  r->desc.num_ops = rec.num_ops;
  r->desc.num_tensors = rec.num_tensors;
  r->desc.in_place_input = rec.in_place_input;
  AttachArrays((uint8_t*)mem + rec.arrays, rec.num_ops, rec.num_tensors, r);
  return true;
}

// ------------------------------------------------------------------ run

namespace {

// What a band loop changes as it runs (on the stack: the region's
// description is read-only, in the interpreter's persistent memory).
struct BandState {
  const Region& r;
  uint8_t* base[kMaxRegionTensors];   // row `have[t].lo` of t is at base[t]
  RowRange have[kMaxRegionTensors];   // rows of t present
  uint32_t row_bytes[kMaxRegionTensors];
};

// The top pad of op `op` run on output rows `rows` from input rows `in` (a
// band whose row 0 is input row in.lo).
int32_t BandPadTop(const OpInfo& op, const RowWindow& w, RowRange rows, RowRange in) {
  if (op.opcode == Opcode::TRANSPOSE_CONV2D) {
    // Input row i feeds output rows from i*stride - pad_top on; in the band
    // that is (i - in.lo)*stride - (pad_top + rows.lo - in.lo*stride). In
    // 0..ext-1 (TransposedWindow's lo is the first input row of rows.lo).
    const auto p = op.Params<TRANSPOSE_CONV2D_Params>();
    return (int32_t)((int64_t)p.pad_top + rows.lo - (int64_t)in.lo * p.stride_h);
  }
  // The window of output row rows.lo starts at rows.lo*stride - pad; in the
  // band (whose row 0 is input row in.lo) that is -pad_top.
  return (int32_t)((int64_t)in.lo - ((int64_t)rows.lo * w.stride - w.pad));
}

// Runs region op i on output rows `rows` (already placed in its buffer).
Status RunOpRows(const Model& m, const EvalContext& ctx, BandState& st, uint32_t i, RowRange rows,
                 uint8_t* out_data) {
  const OpInfo op = m.op(st.r.first_op + i);
  const int32_t pad_word = st.r.pad_word[i];
  const RegionOpDesc& d = st.r.desc.ops[i];
  TensorView views[kMaxRegionOpRowInputs + 1];
  uint32_t n = 0;
  int32_t pad_top = 0;
  uint32_t in_row = 0;
  for (uint32_t j = 0; j < d.num_inputs; ++j) {
    const uint32_t t = d.in[j];
    const RowRange in = InputRows(d.window[j], st.r.desc.height[t], rows);
    views[n++] = {st.r.tensors[t], in.size(),
                  st.base[t] + (size_t)(in.lo - st.have[t].lo) * st.row_bytes[t]};
    if (j == 0) {
      pad_top = BandPadTop(op, d.window[0], rows, in);
      in_row = in.lo;
    }
  }
  views[n++] = {st.r.tensors[d.out], rows.size(), out_data};
  // Params with the band's top pad (bounded by the op's own pad: 0..65535).
  uint8_t words[4 * kMaxBandParams];
  OpInfo band_op = op;
  if (pad_word >= 0) {
    if (op.params_count > kMaxBandParams)
      return Status::Error(StatusCode::kInvalidBlob, "params too long for a band");
    memcpy(words, op.params, 4u * op.params_count);
    memcpy(words + 4 * pad_word, &pad_top, 4);
    band_op.params = words;
  }
  EvalContext band_ctx = ctx;
  band_ctx.views = views;
  band_ctx.num_views = n;
  band_ctx.band_out_row = rows.lo;
  band_ctx.band_in_row = in_row;
  return LookupOpKernel(op.opcode)->eval(band_op, band_ctx);
}

}  // namespace

}  // namespace band

namespace {

using namespace xts3;
using namespace band;

Status ValidateBandLoop(const Model&, const OpInfo& op) {
  // The region itself is checked by CheckRegions once every op is parsed.
  const auto p = op.Params<BAND_LOOP_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.num_ops, "num_ops", 1, (int32_t)kMaxRegionOps));
  return ops::ExpectRange(p.band_rows, "band_rows", 1, (int32_t)kMaxDim);
}

Status EvalBandLoop(const OpInfo& loop, const EvalContext& ctx) {
  const Model& m = *ctx.model;
  // Described once by Interpreter::Init (DescribeRegions); here only read.
  Region region;
  if (!FindRegion(ctx.regions, ctx.num_regions, loop.index, &region))
    return Status::Error(StatusCode::kNotInitialized, "no region data for this BAND_LOOP");
  BandState st{region, {}, {}, {}};
  const RegionDesc& d = st.r.desc;
  const uint32_t out_t = OutputTensor(d);
  for (uint32_t t = 0; t < d.num_tensors; ++t) {
    const TensorInfo ti = m.tensor(st.r.tensors[t]);
    st.base[t] = ctx.arena + ti.offset;  // int8 (R2), so never an EXTERNAL (FLOAT32) input
    st.row_bytes[t] = RowBytes(ti);
    st.have[t] = st.r.produced[t] ? RowRange{0, 0} : RowRange{0, ti.dims[1]};
  }
  uint8_t* staging = st.r.in_place ? ctx.arena + m.tensor(st.r.staging).offset : nullptr;
  uint8_t* x_base = st.r.in_place ? st.base[d.in_place_input] : nullptr;
  const uint32_t out_row = st.row_bytes[out_t];
  uint32_t flushed = 0;  // IN_PLACE: output rows [0, flushed) are written back

  const uint32_t bands = NumBands(d, st.r.band_rows);
  RowRange need[kMaxRegionTensors], next[kMaxRegionTensors];
  BandNeeds(d, st.r.band_rows, 0, next);
  for (uint32_t k = 0; k < bands; ++k) {
    for (uint32_t t = 0; t < d.num_tensors; ++t) need[t] = next[t];
    if (k + 1 < bands) BandNeeds(d, st.r.band_rows, k + 1, next);
    for (uint32_t i = 0; i < d.num_ops; ++i) {
      const uint32_t o = d.ops[i].out;
      const RowRange want = need[o];
      if (o == out_t) {
        uint8_t* dst = st.r.in_place ? staging + (size_t)(want.lo - flushed) * out_row
                                     : st.base[o] + (size_t)want.lo * out_row;
        ESPNN_RETURN_IF_ERROR(RunOpRows(m, ctx, st, i, want, dst));
        continue;
      }
      // Keep the rows this band shares with the last one, compute the rest.
      RowRange& have = st.have[o];
      uint32_t from = want.lo;
      if (!have.empty() && have.hi > want.lo) {
        memmove(st.base[o], st.base[o] + (size_t)(want.lo - have.lo) * st.row_bytes[o],
                (size_t)(have.hi - want.lo) * st.row_bytes[o]);
        from = have.hi;
      }
      have = want;
      if (want.hi > from)
        ESPNN_RETURN_IF_ERROR(RunOpRows(m, ctx, st, i, {from, want.hi},
                                        st.base[o] + (size_t)(from - want.lo) * st.row_bytes[o]));
    }
    if (st.r.in_place) {
      const RowRange band_rows = BandRows(d, st.r.band_rows, k);
      const uint32_t upto = FlushedAfter(d, st.r.band_rows, k, next);
      memcpy(x_base + (size_t)flushed * out_row, staging, (size_t)(upto - flushed) * out_row);
      memmove(staging, staging + (size_t)(upto - flushed) * out_row,
              (size_t)(band_rows.hi - upto) * out_row);
      flushed = upto;
      // The input's rows below `flushed` are now output rows; no later band
      // reads them (FlushedAfter).
    }
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kBandLoopKernel = {ValidateBandLoop, nullptr, EvalBandLoop};

}  // namespace espnn
