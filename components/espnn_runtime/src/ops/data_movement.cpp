// Data movement: RESHAPE, TRANSPOSE, SLICE, PAD, CONCAT, SPLIT. ESP-NN has no
// kernels for these; they run in the interpreter.
//
// They move whole elements and never look at their values, so they work on
// every dtype (INT8, INT32, FLOAT32) by element size. Input and output dtypes
// must match, and for INT8 the quantization must match too: these ops do not
// requantize (the lowering inserts a REQUANTIZE where PyTorch's output
// quantization differs). Element copies go through memcpy because graph
// inputs and constants may sit at any 4-byte-misaligned address the caller
// chose; memcpy of a constant size compiles to plain loads where that is safe.
//
// Parameter arrays are per dimension (perm0..4, begin0..4, ...); by the same
// convention as a tensor record's dims, entries at or beyond the tensor's rank
// are unused and must be 0.
//
// Gathers whose output would overlap an arena input are rejected at parse
// time: a strided copy in place would read bytes it has already overwritten.
// RESHAPE alone may alias its input (then it is a view and copies nothing).
#include <stdio.h>
#include <string.h>

#include "ops/op_util.h"

namespace espnn {
namespace {

using namespace xts3;

// ------------------------------------------------------------------ checks

// Same dtype, and for INT8 the same quantization (no requantization here).
Status ExpectSameData(const TensorInfo& a, const char* what_a, const TensorInfo& b,
                      const char* what_b) {
  if (a.dtype != b.dtype)
    return ops::Fail("%s has dtype %s but %s has %s", what_b, DTypeName(b.dtype), what_a,
                     DTypeName(a.dtype));
  if (a.dtype == DType::INT8) return ops::ExpectSameQuant(a, what_a, b, what_b);
  return Status::Ok();
}

Status ExpectSameRank(const TensorInfo& a, const char* what_a, const TensorInfo& b,
                      const char* what_b) {
  if (a.rank != b.rank)
    return ops::Fail("%s has rank %u, %s has rank %u", what_b, (unsigned)b.rank, what_a,
                     (unsigned)a.rank);
  return Status::Ok();
}

// Byte ranges of two arena tensors must be disjoint (see the file comment).
Status ExpectNoOverlap(const TensorInfo& in, const char* what_in, const TensorInfo& out,
                       const char* what_out) {
  if (in.memory != Memory::ARENA || out.memory != Memory::ARENA) return Status::Ok();
  // Both ranges lie inside the arena (< 2^31), so the sums cannot wrap.
  const bool disjoint = in.offset + in.nbytes <= out.offset || out.offset + out.nbytes <= in.offset;
  if (!disjoint)
    return ops::Fail("%s (arena [%u, +%u)) overlaps %s (arena [%u, +%u))", what_out,
                     (unsigned)out.offset, (unsigned)out.nbytes, what_in, (unsigned)in.offset,
                     (unsigned)in.nbytes);
  return Status::Ok();
}

// "dims [a,b,c]" for messages.
void FormatDims(const TensorInfo& t, char* buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (uint32_t d = 0; d < t.rank && n < cap; ++d) {
    int w = snprintf(buf + n, cap - n, d == 0 ? "[%u" : ",%u", (unsigned)t.dims[d]);
    if (w < 0) return;
    n += (size_t)w;
  }
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

// Row-major element strides of a tensor.
void Strides(const TensorInfo& t, uint32_t* stride) {
  uint32_t s = 1;
  for (uint32_t d = t.rank; d-- > 0;) {
    stride[d] = s;
    s *= t.dims[d];  // <= element count < 2^31
  }
}

// ------------------------------------------------------------------ copying

// Copies `n` elements of `esize` bytes from src (element stride `sstride`) to
// dst (element stride `dstride`). The constant-size memcpy calls become
// single loads/stores; they keep possibly misaligned data access legal.
void CopyRow(const uint8_t* src, uint32_t sstride, uint8_t* dst, uint32_t dstride, uint32_t n,
             uint32_t esize) {
  if (sstride == 1 && dstride == 1) {
    memcpy(dst, src, (size_t)n * esize);
  } else if (esize == 1) {
    for (uint32_t i = 0; i < n; ++i) dst[(size_t)i * dstride] = src[(size_t)i * sstride];
  } else if (esize == 4) {
    const size_t sb = (size_t)sstride * 4, db = (size_t)dstride * 4;
    for (uint32_t i = 0; i < n; ++i) memcpy(dst + i * db, src + i * sb, 4);
  } else {  // no such dtype today; correct, just not specialised
    const size_t sb = (size_t)sstride * esize, db = (size_t)dstride * esize;
    for (uint32_t i = 0; i < n; ++i) memcpy(dst + i * db, src + i * sb, esize);
  }
}

// The general strided copy behind TRANSPOSE, SLICE and PAD: visits every
// index of `dims` (rank 1..5) in row-major order and copies one element from
// src + sum(idx * sstride) to dst + sum(idx * dstride) (strides in elements).
// The caller guarantees every visited offset is inside its tensor; then every
// partial sum is too, so uint32_t arithmetic cannot overflow.
void StridedCopy(const uint8_t* src, const uint32_t* sstride, uint8_t* dst,
                 const uint32_t* dstride, const uint32_t* dims, uint32_t rank, uint32_t esize) {
  const uint32_t last = rank - 1;
  uint32_t outer = 1;
  for (uint32_t d = 0; d < last; ++d) outer *= dims[d];
  uint32_t idx[kMaxRank] = {0, 0, 0, 0, 0};
  uint32_t soff = 0, doff = 0;  // element offsets of the current row
  for (uint32_t row = 0; row < outer; ++row) {
    CopyRow(src + (size_t)soff * esize, sstride[last], dst + (size_t)doff * esize, dstride[last],
            dims[last], esize);
    // Odometer increment over the outer dimensions. Rewinding a dimension
    // subtracts exactly what its increments added, so offsets never leave
    // their tensors.
    for (uint32_t d = last; d-- > 0;) {
      soff += sstride[d];
      doff += dstride[d];
      if (++idx[d] < dims[d]) break;
      soff -= sstride[d] * dims[d];
      doff -= dstride[d] * dims[d];
      idx[d] = 0;
    }
  }
}

// Fills `n` elements with the element value `value` (esize bytes, host order).
void Fill(uint8_t* dst, uint32_t n, const uint8_t* value, uint32_t esize) {
  if (n == 0) return;
  if (esize == 1) {
    memset(dst, value[0], n);
    return;
  }
  memcpy(dst, value, esize);
  // Doubling copies: each memcpy duplicates the already written prefix.
  size_t done = esize, total = (size_t)n * esize;
  while (done < total) {
    size_t chunk = done < total - done ? done : total - done;
    memcpy(dst + done, dst, chunk);
    done += chunk;
  }
}

// ------------------------------------------------------------------ RESHAPE

Status ValidateReshape(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ExpectSameData(in, "input", out, "output"));
  if (in.num_elements() != out.num_elements()) {
    char a[64], b[64];
    FormatDims(in, a, sizeof(a));
    FormatDims(out, b, sizeof(b));
    return ops::Fail("output dims %s have %u elements, input dims %s have %u", b,
                     (unsigned)out.num_elements(), a, (unsigned)in.num_elements());
  }
  return Status::Ok();
}

Status EvalReshape(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  // Same arena bytes: the lowering made the reshape a view.
  if (in.memory == Memory::ARENA && in.offset == out.offset) return Status::Ok();
  // memmove: a planner may let the ranges overlap partially.
  memmove(ctx.out(op.outputs[0]), ctx.in(op.inputs[0]), out.nbytes);
  return Status::Ok();
}

// ------------------------------------------------------------------ TRANSPOSE

void Perm(const TRANSPOSE_Params& p, int32_t* perm) {
  perm[0] = p.perm0;
  perm[1] = p.perm1;
  perm[2] = p.perm2;
  perm[3] = p.perm3;
  perm[4] = p.perm4;
}

Status ValidateTranspose(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ExpectSameData(in, "input", out, "output"));
  ESPNN_RETURN_IF_ERROR(ExpectSameRank(in, "input", out, "output"));
  int32_t perm[kMaxRank];
  Perm(op.Params<TRANSPOSE_Params>(), perm);
  bool seen[kMaxRank] = {false, false, false, false, false};
  for (uint32_t d = 0; d < kMaxRank; ++d) {
    if (d >= in.rank) {
      if (perm[d] != 0)
        return ops::Fail("perm%u = %d must be 0 beyond rank %u", (unsigned)d, (int)perm[d],
                         (unsigned)in.rank);
      continue;
    }
    if (perm[d] < 0 || perm[d] >= (int32_t)in.rank)
      return ops::Fail("perm%u = %d is not in 0..%u", (unsigned)d, (int)perm[d],
                       (unsigned)in.rank - 1);
    if (seen[perm[d]])
      return ops::Fail("perm%u = %d repeats an axis: perm is not a permutation", (unsigned)d,
                       (int)perm[d]);
    seen[perm[d]] = true;
    if (out.dims[d] != in.dims[perm[d]])
      return ops::Fail("output dims[%u] = %u, expected input dims[perm%u = %d] = %u", (unsigned)d,
                       (unsigned)out.dims[d], (unsigned)d, (int)perm[d],
                       (unsigned)in.dims[perm[d]]);
  }
  return ExpectNoOverlap(in, "input", out, "output");
}

Status EvalTranspose(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  int32_t perm[kMaxRank];
  Perm(op.Params<TRANSPOSE_Params>(), perm);
  uint32_t istride[kMaxRank], ostride[kMaxRank], sstride[kMaxRank];
  Strides(in, istride);
  Strides(out, ostride);
  // Output axis d walks input axis perm[d].
  for (uint32_t d = 0; d < out.rank; ++d) sstride[d] = istride[perm[d]];
  StridedCopy(ctx.in(op.inputs[0]), sstride, ctx.out(op.outputs[0]), ostride, out.dims, out.rank,
              DTypeSize(out.dtype));
  return Status::Ok();
}

// ------------------------------------------------------------------ SLICE

void BeginStep(const SLICE_Params& p, int32_t* begin, int32_t* step) {
  begin[0] = p.begin0;
  begin[1] = p.begin1;
  begin[2] = p.begin2;
  begin[3] = p.begin3;
  begin[4] = p.begin4;
  step[0] = p.step0;
  step[1] = p.step1;
  step[2] = p.step2;
  step[3] = p.step3;
  step[4] = p.step4;
}

// output[i] = input[begin + i * step] per dimension; the output dims give the
// count. Unused entries (at or beyond rank) are 0 for step as for begin.
Status ValidateSlice(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ExpectSameData(in, "input", out, "output"));
  ESPNN_RETURN_IF_ERROR(ExpectSameRank(in, "input", out, "output"));
  int32_t begin[kMaxRank], step[kMaxRank];
  BeginStep(op.Params<SLICE_Params>(), begin, step);
  for (uint32_t d = 0; d < kMaxRank; ++d) {
    if (d >= in.rank) {
      if (begin[d] != 0)
        return ops::Fail("begin%u = %d must be 0 beyond rank %u", (unsigned)d, (int)begin[d],
                         (unsigned)in.rank);
      if (step[d] != 0)
        return ops::Fail("step%u = %d must be 0 beyond rank %u", (unsigned)d, (int)step[d],
                         (unsigned)in.rank);
      continue;
    }
    if (begin[d] < 0 || (uint32_t)begin[d] >= in.dims[d])
      return ops::Fail("begin%u = %d is not in 0..%u (input dims[%u] = %u)", (unsigned)d,
                       (int)begin[d], (unsigned)in.dims[d] - 1, (unsigned)d,
                       (unsigned)in.dims[d]);
    if (step[d] < 1) return ops::Fail("step%u = %d must be >= 1", (unsigned)d, (int)step[d]);
    // (out - 1) < 2^24 and step < 2^31: the 64-bit sum cannot wrap.
    const uint64_t last = (uint64_t)begin[d] + (uint64_t)(out.dims[d] - 1) * (uint64_t)step[d];
    if (last >= in.dims[d])
      return ops::Fail("begin%u = %d + (output dims[%u] = %u - 1) * step%u = %d reaches index "
                       "%llu, beyond input dims[%u] = %u",
                       (unsigned)d, (int)begin[d], (unsigned)d, (unsigned)out.dims[d],
                       (unsigned)d, (int)step[d], (unsigned long long)last, (unsigned)d,
                       (unsigned)in.dims[d]);
  }
  return ExpectNoOverlap(in, "input", out, "output");
}

Status EvalSlice(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  int32_t begin[kMaxRank], step[kMaxRank];
  BeginStep(op.Params<SLICE_Params>(), begin, step);
  const uint32_t esize = DTypeSize(out.dtype);
  uint32_t istride[kMaxRank], ostride[kMaxRank], sstride[kMaxRank];
  Strides(in, istride);
  Strides(out, ostride);
  uint32_t base = 0;
  for (uint32_t d = 0; d < in.rank; ++d) {
    base += (uint32_t)begin[d] * istride[d];
    // A dimension of extent 1 never advances: its step does not matter, and
    // ignoring it keeps stride * dims (used when rewinding) small.
    sstride[d] = out.dims[d] == 1 ? 0 : (uint32_t)step[d] * istride[d];
  }
  StridedCopy(ctx.in(op.inputs[0]) + (size_t)base * esize, sstride, ctx.out(op.outputs[0]),
              ostride, out.dims, out.rank, esize);
  return Status::Ok();
}

// ------------------------------------------------------------------ PAD

// Constant padding. before0..4 >= 0 elements before each dimension; the
// amount after is implied: output dims - input dims - before >= 0.
// pad_value is the raw element value written into the padding:
//   INT8    the quantized value (in -128..127; usually the zero point),
//   INT32   the integer itself,
//   FLOAT32 the IEEE-754 bit pattern of the float (as `_f32` fields are).
void Before(const PAD_Params& p, int32_t* before) {
  before[0] = p.before0;
  before[1] = p.before1;
  before[2] = p.before2;
  before[3] = p.before3;
  before[4] = p.before4;
}

Status ValidatePad(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ExpectSameData(in, "input", out, "output"));
  ESPNN_RETURN_IF_ERROR(ExpectSameRank(in, "input", out, "output"));
  const auto p = op.Params<PAD_Params>();
  int32_t before[kMaxRank];
  Before(p, before);
  for (uint32_t d = 0; d < kMaxRank; ++d) {
    if (d >= in.rank) {
      if (before[d] != 0)
        return ops::Fail("before%u = %d must be 0 beyond rank %u", (unsigned)d, (int)before[d],
                         (unsigned)in.rank);
      continue;
    }
    if (before[d] < 0) return ops::Fail("before%u = %d must be >= 0", (unsigned)d, (int)before[d]);
    // int64: before < 2^31 and dims <= 2^24.
    const int64_t after = (int64_t)out.dims[d] - (int64_t)in.dims[d] - (int64_t)before[d];
    if (after < 0)
      return ops::Fail("after%u = output dims[%u] (%u) - input dims[%u] (%u) - before%u (%d) = "
                       "%lld must be >= 0",
                       (unsigned)d, (unsigned)d, (unsigned)out.dims[d], (unsigned)d,
                       (unsigned)in.dims[d], (unsigned)d, (int)before[d], (long long)after);
  }
  if (in.dtype == DType::INT8)
    ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.pad_value, "pad_value", -128, 127));
  return ExpectNoOverlap(in, "input", out, "output");
}

Status EvalPad(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  const auto p = op.Params<PAD_Params>();
  int32_t before[kMaxRank];
  Before(p, before);
  const uint32_t esize = DTypeSize(out.dtype);
  uint8_t value[4];
  if (esize == 1) {
    value[0] = (uint8_t)(int8_t)p.pad_value;
  } else {
    memcpy(value, &p.pad_value, 4);  // INT32 value or FLOAT32 bits, host order
  }
  uint8_t* dst = ctx.out(op.outputs[0]);
  // Fill everything, then copy the input into the interior: simpler than
  // visiting only the border, and the border is usually most of the rows.
  Fill(dst, out.num_elements(), value, esize);
  uint32_t istride[kMaxRank], ostride[kMaxRank];
  Strides(in, istride);
  Strides(out, ostride);
  uint32_t base = 0;
  for (uint32_t d = 0; d < in.rank; ++d) base += (uint32_t)before[d] * ostride[d];
  StridedCopy(ctx.in(op.inputs[0]), istride, dst + (size_t)base * esize, ostride, in.dims,
              in.rank, esize);
  return Status::Ok();
}

// ------------------------------------------------------------------ CONCAT / SPLIT

// "input 3" / "output 15" for messages.
constexpr size_t kPartNameCapacity = 24;
void PartName(const char* kind, uint32_t k, char* buf) {
  snprintf(buf, kPartNameCapacity, "%s %u", kind, (unsigned)k);
}

// Shared checks: `whole` is CONCAT's output or SPLIT's input, `parts` the other
// side. Every part has the whole's dtype, quantization and rank, and its dims
// except on `axis`, where the parts' dims add up to the whole's.
Status ValidateParts(const Model& m, const OpInfo& op, bool concat) {
  const TensorInfo whole = concat ? ops::OutputTensor(m, op, 0) : ops::InputTensor(m, op, 0);
  const char* whole_name = concat ? "output" : "input";
  const char* part_kind = concat ? "input" : "output";
  const uint32_t nparts = concat ? op.num_inputs : op.num_outputs;
  const int32_t axis = concat ? op.Params<CONCAT_Params>().axis : op.Params<SPLIT_Params>().axis;
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(axis, "axis", 0, (int32_t)whole.rank - 1));
  uint32_t sum = 0;  // <= 16 * 2^24: no overflow
  for (uint32_t k = 0; k < nparts; ++k) {
    const TensorInfo part = concat ? ops::InputTensor(m, op, k) : ops::OutputTensor(m, op, k);
    char name[kPartNameCapacity];
    PartName(part_kind, k, name);
    ESPNN_RETURN_IF_ERROR(ExpectSameData(whole, whole_name, part, name));
    ESPNN_RETURN_IF_ERROR(ExpectSameRank(whole, whole_name, part, name));
    for (uint32_t d = 0; d < whole.rank; ++d) {
      if (d != (uint32_t)axis && part.dims[d] != whole.dims[d])
        return ops::Fail("%s dims[%u] = %u differs from %s dims[%u] = %u (only axis %d may differ)",
                         name, (unsigned)d, (unsigned)part.dims[d], whole_name, (unsigned)d,
                         (unsigned)whole.dims[d], (int)axis);
    }
    sum += part.dims[axis];
  }
  if (sum != whole.dims[axis])
    return ops::Fail("%ss' dims[axis=%d] sum to %u, %s dims[%d] = %u", part_kind, (int)axis,
                     (unsigned)sum, whole_name, (int)axis, (unsigned)whole.dims[axis]);
  // Only the output side can be overwritten while the other is still read.
  for (uint32_t k = 0; k < nparts; ++k) {
    const TensorInfo part = concat ? ops::InputTensor(m, op, k) : ops::OutputTensor(m, op, k);
    char name[kPartNameCapacity];
    PartName(part_kind, k, name);
    if (concat) {
      ESPNN_RETURN_IF_ERROR(ExpectNoOverlap(part, name, whole, whole_name));
    } else {
      ESPNN_RETURN_IF_ERROR(ExpectNoOverlap(whole, whole_name, part, name));
    }
  }
  return Status::Ok();
}

Status ValidateConcat(const Model& m, const OpInfo& op) { return ValidateParts(m, op, true); }
Status ValidateSplit(const Model& m, const OpInfo& op) { return ValidateParts(m, op, false); }

// Both sides are row-major, so with outer = prod(dims[0..axis)) and inner =
// prod(dims(axis..]) a part is `outer` contiguous blocks of
// part.dims[axis] * inner elements, interleaved in the whole.
void OuterInner(const TensorInfo& t, uint32_t axis, uint32_t* outer, uint32_t* inner) {
  *outer = 1;
  *inner = 1;
  for (uint32_t d = 0; d < axis; ++d) *outer *= t.dims[d];
  for (uint32_t d = axis + 1; d < t.rank; ++d) *inner *= t.dims[d];
}

Status EvalConcat(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo out = ctx.tensor(op.outputs[0]);
  const uint32_t axis = (uint32_t)op.Params<CONCAT_Params>().axis;
  const uint32_t esize = DTypeSize(out.dtype);
  uint32_t outer, inner;
  OuterInner(out, axis, &outer, &inner);
  const size_t row_bytes = (size_t)out.dims[axis] * inner * esize;
  uint8_t* dst = ctx.out(op.outputs[0]);
  size_t col = 0;  // byte position of the current input inside an output row
  for (uint32_t k = 0; k < op.num_inputs; ++k) {
    const TensorInfo in = ctx.tensor(op.inputs[k]);
    const uint8_t* src = ctx.in(op.inputs[k]);
    const size_t block = (size_t)in.dims[axis] * inner * esize;
    for (uint32_t o = 0; o < outer; ++o) memcpy(dst + o * row_bytes + col, src + o * block, block);
    col += block;
  }
  return Status::Ok();
}

Status EvalSplit(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const uint32_t axis = (uint32_t)op.Params<SPLIT_Params>().axis;
  const uint32_t esize = DTypeSize(in.dtype);
  uint32_t outer, inner;
  OuterInner(in, axis, &outer, &inner);
  const size_t row_bytes = (size_t)in.dims[axis] * inner * esize;
  const uint8_t* src = ctx.in(op.inputs[0]);
  size_t col = 0;
  for (uint32_t k = 0; k < op.num_outputs; ++k) {
    const TensorInfo out = ctx.tensor(op.outputs[k]);
    uint8_t* dst = ctx.out(op.outputs[k]);
    const size_t block = (size_t)out.dims[axis] * inner * esize;
    for (uint32_t o = 0; o < outer; ++o) memcpy(dst + o * block, src + o * row_bytes + col, block);
    col += block;
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kReshapeKernel = {ValidateReshape, nullptr, EvalReshape};
extern const OpKernel kTransposeKernel = {ValidateTranspose, nullptr, EvalTranspose};
extern const OpKernel kSliceKernel = {ValidateSlice, nullptr, EvalSlice};
extern const OpKernel kPadKernel = {ValidatePad, nullptr, EvalPad};
extern const OpKernel kConcatKernel = {ValidateConcat, nullptr, EvalConcat};
extern const OpKernel kSplitKernel = {ValidateSplit, nullptr, EvalSplit};

}  // namespace espnn
