// CONV2D: int8 2-D convolution, NHWC input [N,H,W,Cin], OHWI filter
// [Cout,kh,kw,Cin/groups], per-channel mult/shift, optional int32 bias.
//
// Routing (validate() accepts all of these):
// * groups == 1, dilation 1 (or a 1-tap axis) -> esp_nn_conv_s8, one image
//   per call, filter_dims.channels = Cin.
// * groups > 1 -> esp_nn_conv_s8_ansi with filter_dims.channels = Cin/groups.
//   ESP-NN 1.2.3's generic optimized path computes grouped 1x1 wrongly and
//   the S3 dispatcher only falls back to ANSI anyway; a dense kernel is never
//   given a grouped filter.
// * dilation != 1 -> the interpreter's own direct convolution (ESP-NN
//   ignores the dilation field), same arithmetic.
//
// Padding: XTS3 carries the top/left pads only; the output size implies the
// bottom/right pad, which validate() accepts anywhere in [0, extent-1]
// (extent = dil*(k-1)+1), like TFLite SAME (extra pad at the end) and
// PyTorch symmetric padding. ESP-NN 1.2.3's S3 general conv pads its input
// copy symmetrically when a leading pad is non-zero and then reads past it
// if the needed trailing pad is larger than the leading one (the last output
// row/column comes out wrong; reference §5.3 item 1). On an optimized S3
// build those layers are routed to the ANSI kernel instead, so every padding
// validate() accepts is computed correctly.
#include <stdint.h>

#include "ops/conv_util.h"
#include "ops/espnn_api.h"

namespace espnn {
namespace {

using namespace xts3;
using namespace conv_util;

struct ConvGeom : ConvShape {
  CONV2D_Params p;
  bool dilated() const { return Dilated(*this, p); }
  bool grouped() const { return p.groups != 1; }
  bool uses_espnn_dense() const { return !dilated() && !grouped(); }
};

ConvGeom Geometry(const Model& m, const OpInfo& op) {
  return {ReadConvShape(m, op), op.Params<CONV2D_Params>()};
}

// At run time: a band in a fused region has its own rows and pad_top.
ConvGeom Geometry(const EvalContext& ctx, const OpInfo& op) {
  return {ReadConvShape(ctx, op), op.Params<CONV2D_Params>()};
}

Status ValidateConv(const Model& m, const OpInfo& op) {
  ESPNN_RETURN_IF_ERROR(CheckConvTensors(m, op));
  const ConvGeom g = Geometry(m, op);
  ESPNN_RETURN_IF_ERROR(CheckEspnnShapeLimits(g));
  ESPNN_RETURN_IF_ERROR(CheckGroupedFilter(g, g.p.groups, (int32_t)g.in_c));
  ESPNN_RETURN_IF_ERROR(CheckConvWindow(g, g.p));
  ESPNN_RETURN_IF_ERROR(CheckOffsets(g.p));
  ESPNN_RETURN_IF_ERROR(CheckRequantConstants(m, op, g.out_c));
  const uint64_t row = (uint64_t)g.k_h * g.k_w * g.filter_c;
  return CheckAccumulatorRange(m, op, g.out_c, row, row, 1, g.p.input_offset);
}

EspnnConvArgs<conv_params_t> EspnnArgs(const ConvGeom& g) {
  return MakeEspnnConvArgs<conv_params_t>(g, g.p);
}

// Only the dense ESP-NN path uses scratch (grouped calls go to ANSI, which
// needs none). Sized as esp-tflite-micro sizes it: real dims and padding,
// in_offset 0, activation [-128, 127].
uint32_t ConvScratchBytes(const Model& m, const OpInfo& op) {
  const ConvGeom g = Geometry(m, op);
  if (!g.uses_espnn_dense()) return 0;
  auto a = EspnnArgs(g);
  a.params.in_offset = 0;
  a.params.activation = {-128, 127};
  const int bytes = esp_nn_get_conv_scratch_size(&a.in_dims, &a.filter_dims, &a.out_dims, &a.params);
  // A negative size means ESP-NN's int arithmetic overflowed: ask for more
  // than any device has so init() fails cleanly.
  return bytes < 0 ? UINT32_MAX : (uint32_t)bytes;
}

// True where ESP-NN 1.2.3's S3 general conv would compute the last output
// row/column wrongly (see the file comment).
bool S3PaddingDefect(const ConvGeom& g) {
  if (g.p.pad_top == 0 && g.p.pad_left == 0) return false;
  const int64_t end_h = ImpliedEndPad(g.in_h, g.k_h, g.out_h, g.p.stride_h, 1, g.p.pad_top);
  const int64_t end_w = ImpliedEndPad(g.in_w, g.k_w, g.out_w, g.p.stride_w, 1, g.p.pad_left);
  return end_h > g.p.pad_top || end_w > g.p.pad_left;
}

Status EvalConv(const OpInfo& op, const EvalContext& ctx) {
  const ConvGeom g = Geometry(ctx, op);
  const ConvData d = ReadConvData(op, ctx);
  if (g.dilated()) {
    // OHWI filter: output o's tap (ky, kx, i) at ((o*kh + ky)*kw + kx)*Cg + i.
    const uint32_t cg = g.filter_c;
    DirectConv(d, g, {cg, g.out_c / (uint32_t)g.p.groups, g.k_h * g.k_w * cg, g.k_w * cg, cg}, g.p);
    return Status::Ok();
  }

  const auto a = EspnnArgs(g);
  quant_data_t quant = EspnnQuant(d);
  const bool padding_defect = kEspnnS3Optimized && S3PaddingDefect(g);
  ForEachImage(g, d, [&](const int8_t* in_n, int8_t* out_n, bool aligned) {
    if (g.grouped() || padding_defect || !aligned) {
      esp_nn_conv_s8_ansi(&a.in_dims, in_n, &a.filter_dims, d.filter, d.bias, &a.out_dims, out_n,
                          &a.params, &quant);
    } else {
      // The scratch pointer is global inside ESP-NN: set it before every call.
      esp_nn_set_conv_scratch_buf(ctx.scratch);
      esp_nn_conv_s8(&a.in_dims, in_n, &a.filter_dims, d.filter, d.bias, &a.out_dims, out_n,
                     &a.params, &quant);
    }
  });
  return Status::Ok();
}

}  // namespace

extern const OpKernel kConv2dKernel = {ValidateConv, ConvScratchBytes, EvalConv};

}  // namespace espnn
