// TRANSPOSE_CONV2D: int8 transposed convolution with PyTorch ConvTranspose2d
// semantics (stride, padding, dilation, groups, output_padding). ESP-NN has
// no such kernel; the interpreter computes it.
//
// Tensors: input int8 [N,H,W,Cin] (NHWC); filter int8 constant
// [Cout, kh, kw, Cin/groups] -- the same OHWI layout as CONV2D. PyTorch's
// ConvTranspose2d weight is [Cin, Cout/groups, kh, kw]; the lowering
// permutes it to W'[g*Cout_g + j, ky, kx, i] = W[g*Cin_g + i, j, ky, kx]
// (no spatial flip); bias/mult/shift int32 [Cout]; output int8
// [N,OH,OW,Cout].
//
// Semantics (PyTorch's scatter): input pixel (iy, ix) contributes through
// tap (ky, kx) to output pixel (iy*stride - pad + ky*dil, ...). Computed
// here as a gather: for each output pixel, sum the taps whose input pixel
// exists, with TFLite's integer pipeline:
//   acc = bias[o] + sum (x + input_offset) * w   (int32, wrapping)
//   y = clamp(MBQM(acc, mult[o], shift[o]) + output_offset, act_min, act_max)
// pad_top/pad_left are PyTorch's `padding`; the output size implies
// output_padding, which must be in [0, max(stride, dilation) - 1] as PyTorch
// requires: OH = (H-1)*stride - 2*pad + dil*(kh-1) + 1 + output_padding.
// No ESP-NN call is involved, so tensor dims are not held to ESP-NN's uint16
// limits; stride, dilation and pad are capped at 65535 only so that every
// coordinate stays inside int32.
#include <stdint.h>

#include "ops/conv_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;
using namespace conv_util;

struct TGeom : ConvShape {
  TRANSPOSE_CONV2D_Params p;
};

TGeom Geometry(const Model& m, const OpInfo& op) {
  return {ReadConvShape(m, op), op.Params<TRANSPOSE_CONV2D_Params>()};
}

// One axis: stride, dilation, pad ranges and the PyTorch output size. With
// the output size <= kMaxDim and pad <= kMaxGeom, this also bounds
// dil*(k-1) <= out + 2*pad, so eval's coordinates fit int32.
Status CheckTransposedAxis(const char* axis, const char* stride_name, int32_t stride,
                           const char* dil_name, int32_t dil, const char* pad_name, int32_t pad,
                           uint32_t in, uint32_t k, uint32_t out) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(stride, stride_name, 1, (int32_t)kMaxGeom));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(dil, dil_name, 1, (int32_t)kMaxGeom));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(pad, pad_name, 0, (int32_t)kMaxGeom));
  const int64_t base =
      ((int64_t)in - 1) * stride - 2 * (int64_t)pad + (int64_t)dil * ((int64_t)k - 1) + 1;
  const int64_t max_output_padding = (stride > dil ? stride : dil) - 1;
  const int64_t lo = base < 1 ? 1 : base;
  const int64_t hi = base + max_output_padding;
  if ((int64_t)out < lo || (int64_t)out > hi) {
    if (hi < 1)
      return ops::Fail("output %s: input %s %u, kernel %u, stride %d, dilation %d, %s %d give no "
                       "output",
                       axis, axis, (unsigned)in, (unsigned)k, (int)stride, (int)dil, pad_name,
                       (int)pad);
    return ops::Fail("output %s %u does not match input %s %u, kernel %u, stride %d, dilation %d, "
                     "%s %d (expected %lld..%lld, output_padding < max(stride, dilation))",
                     axis, (unsigned)out, axis, (unsigned)in, (unsigned)k, (int)stride, (int)dil,
                     pad_name, (int)pad, (long long)lo, (long long)hi);
  }
  return Status::Ok();
}

Status ValidateTransposeConv(const Model& m, const OpInfo& op) {
  ESPNN_RETURN_IF_ERROR(CheckConvTensors(m, op));
  const TGeom g = Geometry(m, op);
  const TRANSPOSE_CONV2D_Params& p = g.p;
  ESPNN_RETURN_IF_ERROR(CheckGroupedFilter(g, p.groups, (int32_t)xts3::kMaxDim));
  ESPNN_RETURN_IF_ERROR(CheckTransposedAxis("height", "stride_h", p.stride_h, "dilation_h",
                                            p.dilation_h, "pad_top", p.pad_top, g.in_h, g.k_h,
                                            g.out_h));
  ESPNN_RETURN_IF_ERROR(CheckTransposedAxis("width", "stride_w", p.stride_w, "dilation_w",
                                            p.dilation_w, "pad_left", p.pad_left, g.in_w, g.k_w,
                                            g.out_w));
  ESPNN_RETURN_IF_ERROR(CheckOffsets(p));
  ESPNN_RETURN_IF_ERROR(CheckRequantConstants(m, op, g.out_c));
  const uint64_t row = (uint64_t)g.k_h * g.k_w * g.filter_c;
  return CheckAccumulatorRange(m, op, g.out_c, row, row, 1, p.input_offset);
}

Status EvalTransposeConv(const OpInfo& op, const EvalContext& ctx) {
  // The shape as the op sees it: a band of a fused region has fewer rows.
  const TGeom g = {ReadConvShape(ctx, op), op.Params<TRANSPOSE_CONV2D_Params>()};
  const TRANSPOSE_CONV2D_Params& p = g.p;
  const ConvData d = ReadConvData(op, ctx);
  int8_t* out = d.output;

  const uint32_t outs_per_group = g.out_c / (uint32_t)p.groups;
  const uint32_t cg = g.filter_c;
  const int32_t in_h = (int32_t)g.in_h, in_w = (int32_t)g.in_w;
  for (uint32_t n = 0; n < g.batch; ++n) {
    const int8_t* image = d.input + n * g.in_h * g.in_w * g.in_c;
    for (uint32_t oy = 0; oy < g.out_h; ++oy) {
      // Position of the output row on the un-cropped (pad-free) output grid.
      const int32_t ty = (int32_t)oy + p.pad_top;
      for (uint32_t ox = 0; ox < g.out_w; ++ox) {
        const int32_t tx = (int32_t)ox + p.pad_left;
        for (uint32_t o = 0; o < g.out_c; ++o) {
          const uint32_t c0 = (o / outs_per_group) * cg;
          const int8_t* w_o = d.filter + o * g.k_h * g.k_w * cg;
          uint32_t acc = d.bias != nullptr ? (uint32_t)d.bias[o] : 0u;
          for (uint32_t ky = 0; ky < g.k_h; ++ky) {
            // Input row iy contributes when iy*stride + ky*dil == ty.
            const int32_t sy = ty - (int32_t)ky * p.dilation_h;
            if (sy < 0) break;  // decreases with ky
            if (sy % p.stride_h != 0) continue;
            const int32_t iy = sy / p.stride_h;
            if (iy >= in_h) continue;
            for (uint32_t kx = 0; kx < g.k_w; ++kx) {
              const int32_t sx = tx - (int32_t)kx * p.dilation_w;
              if (sx < 0) break;
              if (sx % p.stride_w != 0) continue;
              const int32_t ix = sx / p.stride_w;
              if (ix >= in_w) continue;
              const int8_t* px = image + ((uint32_t)iy * g.in_w + (uint32_t)ix) * g.in_c + c0;
              const int8_t* w = w_o + (ky * g.k_w + kx) * cg;
              for (uint32_t i = 0; i < cg; ++i)
                acc += (uint32_t)(((int32_t)px[i] + p.input_offset) * (int32_t)w[i]);
            }
          }
          *out++ = Requantize(acc, d.mult[o], d.shift[o], p.output_offset, p.act_min, p.act_max);
        }
      }
    }
  }
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
ESPNN_S3_SCALAR_ROUTE(kTransposeConvS3Rule, "interpreter transposed conv",
                      "§3/§5.1: ESP-NN has no transposed conv; the interpreter computes it");
#endif

}  // namespace

extern const OpKernel kTransposeConv2dKernel = {ValidateTransposeConv, nullptr,
                                                EvalTransposeConv ESPNN_S3_ROUTE(kTransposeConvS3Rule)};

}  // namespace espnn
