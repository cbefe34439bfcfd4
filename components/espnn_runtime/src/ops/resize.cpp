// RESIZE_NEAREST and RESIZE_BILINEAR on int8 NHWC tensors (rank 4, every
// image of the batch). ESP-NN has no resize kernels; they run here.
//
// Neither op computes a coordinate at run time. The lowering tabulates, per
// output row and per output column, which input rows/columns are read (and
// for bilinear with which Q10 weight), so every PyTorch mode (nearest,
// nearest-exact, align_corners true/false, explicit scale factors) is one
// code path here and the device needs no floating point. The tables are
// int32 constants; validate() reads them and checks every entry, so eval()
// can index with them unchecked.
//
// Input and output share scale and zero point: the result is a convex
// combination of input values (or a copy of one), which needs no
// requantization.
#include <string.h>

#include "ops/op_util.h"

namespace espnn {
namespace {

using namespace xts3;

constexpr int32_t kFracOne = 1 << kBilinearFracBits;  // weight 1.0 in Q10
// Entries per row of a bilinear table: i0, i1, frac.
constexpr uint32_t kBilinearRow = 3;

// Checks shared by both ops: int8 NHWC in/out, same batch and channels, same
// quantization.
Status ValidateImages(const TensorInfo& in, const TensorInfo& out) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 4));
  if (out.dims[0] != in.dims[0])
    return ops::Fail("output batch dims[0] = %u, input has %u", (unsigned)out.dims[0],
                     (unsigned)in.dims[0]);
  if (out.dims[3] != in.dims[3])
    return ops::Fail("output channels dims[3] = %u, input has %u", (unsigned)out.dims[3],
                     (unsigned)in.dims[3]);
  return ops::ExpectSameQuant(in, "input", out, "output");
}

// A constant int32 table of exactly `rows` x `cols` (cols == 1: a vector of
// `rows`). rows <= kMaxDim = 2^24 and cols <= 3, so the product fits; it is
// still computed in 64 bits so the check does not depend on those limits.
Status ExpectTable(const TensorInfo& t, const char* what, uint32_t rows, uint32_t cols) {
  const uint64_t n = (uint64_t)rows * cols;
  if (n > kMaxTensorBytes) return ops::Fail("%s would need %llu entries", what, (unsigned long long)n);
  ESPNN_RETURN_IF_ERROR(ops::ExpectConstVector(t, what, DType::INT32, (uint32_t)n));
  const bool shape_ok = cols == 1 ? (t.rank == 1 && t.dims[0] == rows)
                                  : (t.rank == 2 && t.dims[0] == rows && t.dims[1] == cols);
  if (!shape_ok) {
    if (cols == 1) return ops::Fail("%s must have dims [%u]", what, (unsigned)rows);
    return ops::Fail("%s must have dims [%u,%u]", what, (unsigned)rows, (unsigned)cols);
  }
  return Status::Ok();
}

// ------------------------------------------------------------------ nearest
// Inputs: input [N,H,W,C], y_index int32 [out_h], x_index int32 [out_w].
// out[n,y,x,:] = in[n, y_index[y], x_index[x], :].

Status ValidateIndexTable(const Model& m, const TensorInfo& t, const char* what, uint32_t rows,
                          uint32_t limit, const char* limit_name) {
  ESPNN_RETURN_IF_ERROR(ExpectTable(t, what, rows, 1));
  const uint8_t* data = m.constant_data(t);
  for (uint32_t i = 0; i < rows; ++i) {
    const int32_t v = ops::LoadI32(data, i);
    if (v < 0 || (uint32_t)v >= limit)
      return ops::Fail("%s[%u] = %d is not in 0..%u (%s %u)", what, (unsigned)i, (int)v,
                       (unsigned)limit - 1, limit_name, (unsigned)limit);
  }
  return Status::Ok();
}

Status ValidateResizeNearest(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ValidateImages(in, out));
  ESPNN_RETURN_IF_ERROR(ValidateIndexTable(m, ops::InputTensor(m, op, 1), "y_index", out.dims[1],
                                           in.dims[1], "input height"));
  return ValidateIndexTable(m, ops::InputTensor(m, op, 2), "x_index", out.dims[2], in.dims[2],
                            "input width");
}

Status EvalResizeNearest(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  const uint8_t* src = ctx.in(op.inputs[0]);
  const uint8_t* ytab = ctx.in(op.inputs[1]);
  const uint8_t* xtab = ctx.in(op.inputs[2]);
  uint8_t* dst = ctx.out(op.outputs[0]);
  const uint32_t n_img = in.dims[0], in_h = in.dims[1], in_w = in.dims[2], c = in.dims[3];
  const uint32_t out_h = out.dims[1], out_w = out.dims[2];
  // In a fused region's band the views start at these image rows (the band
  // window holds every row the table names: band_loop.cpp TableWindow).
  const uint32_t y0 = ctx.band_out_row, in0 = ctx.band_in_row;
  for (uint32_t n = 0; n < n_img; ++n) {
    const uint8_t* image = src + (size_t)n * in_h * in_w * c;
    for (uint32_t y = 0; y < out_h; ++y) {
      const uint8_t* row = image + (size_t)((uint32_t)ops::LoadI32(ytab, y0 + y) - in0) * in_w * c;
      for (uint32_t x = 0; x < out_w; ++x) {
        memcpy(dst, row + (size_t)(uint32_t)ops::LoadI32(xtab, x) * c, c);
        dst += c;
      }
    }
  }
  return Status::Ok();
}

// ------------------------------------------------------------------ bilinear
// Inputs: input [N,H,W,C], y_table int32 [out_h, 3], x_table int32 [out_w, 3].
// A table row (i0, i1, frac) says: this output coordinate reads input
// rows/columns i0 and i1 with weights (1024 - frac) and frac (Q10, frac in
// 0..1024).
//
//   acc = sum over the 4 taps of x * wy * wx     (Q20; the weights sum to 2^20)
//   out = acc / 2^20 rounded half away from zero
//
// This is TFLite's integer bilinear resize: it interpolates the raw int8
// values. Because the weights sum to exactly 1, interpolating (x - zp) and
// adding zp back gives the same real value, so the zero point needs no
// arithmetic (the two can differ only in the direction of an exact .5 tie).
// |x| <= 128 and the weights sum to 2^20, so |acc| <= 2^27 fits int32, and the
// rounded result lies between the smallest and largest tap: no clamp needed.

Status ValidateBilinearTable(const Model& m, const TensorInfo& t, const char* what, uint32_t rows,
                             uint32_t limit, const char* limit_name) {
  ESPNN_RETURN_IF_ERROR(ExpectTable(t, what, rows, kBilinearRow));
  const uint8_t* data = m.constant_data(t);
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t base = r * kBilinearRow;  // < 3 * 2^24: fits
    for (uint32_t k = 0; k < 2; ++k) {
      const int32_t v = ops::LoadI32(data, base + k);
      if (v < 0 || (uint32_t)v >= limit)
        return ops::Fail("%s[%u].i%u = %d is not in 0..%u (%s %u)", what, (unsigned)r,
                         (unsigned)k, (int)v, (unsigned)limit - 1, limit_name, (unsigned)limit);
    }
    const int32_t frac = ops::LoadI32(data, base + 2);
    if (frac < 0 || frac > kFracOne)
      return ops::Fail("%s[%u].frac = %d is not in 0..%d", what, (unsigned)r, (int)frac,
                       (int)kFracOne);
  }
  return Status::Ok();
}

Status ValidateResizeBilinear(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ValidateImages(in, out));
  ESPNN_RETURN_IF_ERROR(ValidateBilinearTable(m, ops::InputTensor(m, op, 1), "y_table",
                                              out.dims[1], in.dims[1], "input height"));
  return ValidateBilinearTable(m, ops::InputTensor(m, op, 2), "x_table", out.dims[2], in.dims[2],
                               "input width");
}

inline int8_t RoundQ20(int32_t acc) {
  constexpr int32_t kHalf = 1 << (2 * kBilinearFracBits - 1);
  constexpr int kShift = 2 * kBilinearFracBits;
  // Shift magnitudes only: right-shifting a negative int is implementation
  // defined before C++20.
  return (int8_t)(acc >= 0 ? (acc + kHalf) >> kShift : -((-acc + kHalf) >> kShift));
}

Status EvalResizeBilinear(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  const uint8_t* ytab = ctx.in(op.inputs[1]);
  const uint8_t* xtab = ctx.in(op.inputs[2]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  const uint32_t n_img = in.dims[0], in_h = in.dims[1], in_w = in.dims[2], c = in.dims[3];
  const uint32_t out_h = out.dims[1], out_w = out.dims[2];
  const size_t row_elems = (size_t)in_w * c;
  const uint32_t y0 = ctx.band_out_row, in0 = ctx.band_in_row;  // as in EvalResizeNearest
  for (uint32_t n = 0; n < n_img; ++n) {
    const int8_t* image = src + (size_t)n * in_h * row_elems;
    for (uint32_t y = 0; y < out_h; ++y) {
      const uint32_t t = 3 * (y0 + y);
      const int8_t* r0 = image + (size_t)((uint32_t)ops::LoadI32(ytab, t) - in0) * row_elems;
      const int8_t* r1 = image + (size_t)((uint32_t)ops::LoadI32(ytab, t + 1) - in0) * row_elems;
      const int32_t wy1 = ops::LoadI32(ytab, t + 2), wy0 = kFracOne - wy1;
      for (uint32_t x = 0; x < out_w; ++x) {
        const size_t c0 = (size_t)(uint32_t)ops::LoadI32(xtab, 3 * x) * c;
        const size_t c1 = (size_t)(uint32_t)ops::LoadI32(xtab, 3 * x + 1) * c;
        const int32_t wx1 = ops::LoadI32(xtab, 3 * x + 2), wx0 = kFracOne - wx1;
        const int32_t w00 = wy0 * wx0, w01 = wy0 * wx1, w10 = wy1 * wx0, w11 = wy1 * wx1;
        const int8_t *p00 = r0 + c0, *p01 = r0 + c1, *p10 = r1 + c0, *p11 = r1 + c1;
        for (uint32_t ch = 0; ch < c; ++ch) {
          const int32_t acc = p00[ch] * w00 + p01[ch] * w01 + p10[ch] * w10 + p11[ch] * w11;
          dst[ch] = RoundQ20(acc);
        }
        dst += c;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kResizeNearestKernel = {ValidateResizeNearest, nullptr, EvalResizeNearest};
extern const OpKernel kResizeBilinearKernel = {ValidateResizeBilinear, nullptr,
                                               EvalResizeBilinear};

}  // namespace espnn
