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

#if defined(CONFIG_NN_OPTIMIZED) && defined(CONFIG_IDF_TARGET_ESP32S3)
constexpr bool kS3OptimizedConv = true;
#else
constexpr bool kS3OptimizedConv = false;
#endif

struct ConvGeom {
  uint32_t batch, in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, group_in_c;
  CONV2D_Params p;
  // The dilation of an axis with a single tap is irrelevant.
  bool dilated() const { return (k_h > 1 && p.dilation_h != 1) || (k_w > 1 && p.dilation_w != 1); }
  bool grouped() const { return p.groups != 1; }
  bool uses_espnn_dense() const { return !dilated() && !grouped(); }
};

ConvGeom Geometry(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, kInput), f = ops::InputTensor(m, op, kFilter),
                   out = ops::OutputTensor(m, op, 0);
  ConvGeom g;
  g.batch = in.dims[0];
  g.in_h = in.dims[1];
  g.in_w = in.dims[2];
  g.in_c = in.dims[3];
  g.out_h = out.dims[1];
  g.out_w = out.dims[2];
  g.out_c = out.dims[3];
  g.k_h = f.dims[1];
  g.k_w = f.dims[2];
  g.group_in_c = f.dims[3];
  g.p = op.Params<CONV2D_Params>();
  return g;
}

Status ValidateConv(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, kInput), f = ops::InputTensor(m, op, kFilter),
                   out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(CheckFilterTensor(f));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(CheckNotInPlace(in, out));
  const ConvGeom g = Geometry(m, op);
  const CONV2D_Params& p = g.p;

  if (out.dims[0] != g.batch)
    return ops::Fail("output batch %u != input batch %u", (unsigned)out.dims[0], (unsigned)g.batch);
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.in_h, "input height"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.in_w, "input width"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.in_c, "input channels"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.out_h, "output height"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.out_w, "output width"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.out_c, "output channels"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.k_h, "filter height"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(g.k_w, "filter width"));

  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.groups, "groups", 1, (int32_t)g.in_c));
  const uint32_t groups = (uint32_t)p.groups;
  if (g.in_c % groups != 0)
    return ops::Fail("groups = %u does not divide input channels %u", (unsigned)groups,
                     (unsigned)g.in_c);
  if (g.out_c % groups != 0)
    return ops::Fail("groups = %u does not divide output channels %u", (unsigned)groups,
                     (unsigned)g.out_c);
  if (f.dims[0] != g.out_c || f.dims[3] != g.in_c / groups)
    return ops::Fail("filter dims [%u,%u,%u,%u]: expected [out_channels = %u, kh, kw, "
                     "in_channels/groups = %u]",
                     (unsigned)f.dims[0], (unsigned)f.dims[1], (unsigned)f.dims[2],
                     (unsigned)f.dims[3], (unsigned)g.out_c, (unsigned)(g.in_c / groups));

  ESPNN_RETURN_IF_ERROR(CheckConvAxis("height", "stride_h", p.stride_h, "dilation_h", p.dilation_h,
                                      "pad_top", p.pad_top, g.in_h, g.k_h, g.out_h));
  ESPNN_RETURN_IF_ERROR(CheckConvAxis("width", "stride_w", p.stride_w, "dilation_w", p.dilation_w,
                                      "pad_left", p.pad_left, g.in_w, g.k_w, g.out_w));
  ESPNN_RETURN_IF_ERROR(CheckOffsets(p.input_offset, p.output_offset, p.act_min, p.act_max));
  return CheckRequantConstants(m, op, g.out_c);
}

struct EspnnConvArgs {
  data_dims_t in_dims, filter_dims, out_dims;
  conv_params_t params;
};

EspnnConvArgs EspnnArgs(const ConvGeom& g) {
  EspnnConvArgs a;
  a.in_dims = {(int32_t)g.in_w, (int32_t)g.in_h, (int32_t)g.in_c, 1};
  a.filter_dims = {(int32_t)g.k_w, (int32_t)g.k_h, (int32_t)g.group_in_c, 0};
  a.out_dims = {(int32_t)g.out_w, (int32_t)g.out_h, (int32_t)g.out_c, 1};
  a.params.in_offset = g.p.input_offset;
  a.params.out_offset = g.p.output_offset;
  a.params.stride = {g.p.stride_w, g.p.stride_h};
  a.params.padding = {g.p.pad_left, g.p.pad_top};
  a.params.dilation = {1, 1};
  a.params.activation = {g.p.act_min, g.p.act_max};
  return a;
}

// Only the dense ESP-NN path uses scratch (grouped calls go to ANSI, which
// needs none). Sized as esp-tflite-micro sizes it: real dims and padding,
// in_offset 0, activation [-128, 127].
uint32_t ConvScratchBytes(const Model& m, const OpInfo& op) {
  const ConvGeom g = Geometry(m, op);
  if (!g.uses_espnn_dense()) return 0;
  EspnnConvArgs a = EspnnArgs(g);
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
  const ConvGeom g = Geometry(*ctx.model, op);
  const int8_t* input = (const int8_t*)ctx.in(op.inputs[kInput]);
  const int8_t* filter = (const int8_t*)ctx.in(op.inputs[kFilter]);
  const int32_t* bias = (const int32_t*)ctx.in(op.inputs[kBias]);  // null when absent
  // ESP-NN's quant_data_t has non-const pointers but only reads them.
  int32_t* mult = (int32_t*)ctx.in(op.inputs[kMult]);
  int32_t* shift = (int32_t*)ctx.in(op.inputs[kShift]);
  int8_t* output = (int8_t*)ctx.out(op.outputs[0]);

  if (g.dilated()) {
    DirectConvArgs d;
    d.input = input;
    d.filter = filter;
    d.bias = bias;
    d.mult = mult;
    d.shift = shift;
    d.output = output;
    d.batch = g.batch;
    d.in_h = g.in_h;
    d.in_w = g.in_w;
    d.in_c = g.in_c;
    d.out_h = g.out_h;
    d.out_w = g.out_w;
    d.out_c = g.out_c;
    d.k_h = g.k_h;
    d.k_w = g.k_w;
    d.group_in_c = g.group_in_c;
    d.outs_per_group = g.out_c / (uint32_t)g.p.groups;
    d.fs_x = g.group_in_c;
    d.fs_y = g.k_w * d.fs_x;
    d.fs_o = g.k_h * d.fs_y;
    d.stride_h = g.p.stride_h;
    d.stride_w = g.p.stride_w;
    d.pad_top = g.p.pad_top;
    d.pad_left = g.p.pad_left;
    d.dil_h = g.p.dilation_h;
    d.dil_w = g.p.dilation_w;
    d.input_offset = g.p.input_offset;
    d.output_offset = g.p.output_offset;
    d.act_min = g.p.act_min;
    d.act_max = g.p.act_max;
    DirectConv(d);
    return Status::Ok();
  }

  const EspnnConvArgs a = EspnnArgs(g);
  quant_data_t quant;
  quant.shift = shift;
  quant.mult = mult;
  const uint32_t in_image = g.in_h * g.in_w * g.in_c, out_image = g.out_h * g.out_w * g.out_c;
  const bool padding_defect = kS3OptimizedConv && S3PaddingDefect(g);
  for (uint32_t n = 0; n < g.batch; ++n) {
    const int8_t* in_n = input + n * in_image;
    int8_t* out_n = output + n * out_image;
    // Arena tensors are 16-byte aligned, but later images of a batch need not
    // be; the optimized paths assume aligned activations, ANSI does not.
    const bool aligned = (((uintptr_t)in_n | (uintptr_t)out_n) & 15u) == 0;
    if (g.grouped() || padding_defect || !aligned) {
      esp_nn_conv_s8_ansi(&a.in_dims, in_n, &a.filter_dims, filter, bias, &a.out_dims, out_n,
                          &a.params, &quant);
    } else {
      // The scratch pointer is global inside ESP-NN: set it before every call.
      esp_nn_set_conv_scratch_buf(ctx.scratch);
      esp_nn_conv_s8(&a.in_dims, in_n, &a.filter_dims, filter, bias, &a.out_dims, out_n,
                     &a.params, &quant);
    }
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kConv2dKernel = {ValidateConv, ConvScratchBytes, EvalConv};

}  // namespace espnn
