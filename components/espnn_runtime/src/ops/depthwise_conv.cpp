// DEPTHWISE_CONV2D: int8 depthwise convolution, NHWC input [N,H,W,C],
// filter [1,kh,kw,C*ch_mult] (TFLite layout; PyTorch groups=C weight
// [C*M,1,kh,kw] permuted), output [N,OH,OW,C*ch_mult] where output channel
// c*M+m reads input channel c. Per-channel mult/shift, optional bias.
//
// Routing: esp_nn_depthwise_conv_s8, one image per call, except
// * dilation != 1 (on an axis with more than one tap): the interpreter's own
//   direct convolution (ESP-NN ignores the dilation field);
// * input height/width or a pad above 32767: ESP-NN computes the window
//   origin (out * stride - pad) in int16_t, which would wrap; the own kernel
//   takes these too;
// * on an optimized ESP32-S3 build, the 3x3 / ch_mult 1 / C % 16 == 0 layers
//   whose pads are neither (0,0) nor (1,1): ESP-NN 1.2.3 dispatches them to
//   a path that writes more scratch than esp_nn_get_depthwise_conv_scratch_size
//   returns (several KB in the reference's example, reference §5.3 item 2,
//   upstream issue #30), so they go to esp_nn_depthwise_conv_s8_ansi.
// Padding: top/left pads are given, the output size implies bottom/right,
// accepted in [0, extent-1] as for CONV2D.
#include <stdint.h>

#include "ops/conv_util.h"
#include "ops/espnn_api.h"

namespace espnn {
namespace {

using namespace xts3;
using namespace conv_util;

#if defined(CONFIG_NN_OPTIMIZED) && defined(CONFIG_IDF_TARGET_ESP32S3)
constexpr bool kS3OptimizedDepthwise = true;
#else
constexpr bool kS3OptimizedDepthwise = false;
#endif

// ESP-NN's window origin is an int16_t.
constexpr uint32_t kMaxInt16Geom = 32767;

struct DwGeom {
  uint32_t batch, in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w;
  DEPTHWISE_CONV2D_Params p;
  bool dilated() const { return (k_h > 1 && p.dilation_h != 1) || (k_w > 1 && p.dilation_w != 1); }
  bool beyond_int16() const {
    return in_h > kMaxInt16Geom || in_w > kMaxInt16Geom || (uint32_t)p.pad_top > kMaxInt16Geom ||
           (uint32_t)p.pad_left > kMaxInt16Geom;
  }
  bool uses_own_kernel() const { return dilated() || beyond_int16(); }
  bool s3_scratch_defect() const {
    return k_h == 3 && k_w == 3 && p.ch_mult == 1 && in_c % 16 == 0 &&
           !((p.pad_top == 0 && p.pad_left == 0) || (p.pad_top == 1 && p.pad_left == 1));
  }
};

DwGeom Geometry(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, kInput), f = ops::InputTensor(m, op, kFilter),
                   out = ops::OutputTensor(m, op, 0);
  DwGeom g;
  g.batch = in.dims[0];
  g.in_h = in.dims[1];
  g.in_w = in.dims[2];
  g.in_c = in.dims[3];
  g.out_h = out.dims[1];
  g.out_w = out.dims[2];
  g.out_c = out.dims[3];
  g.k_h = f.dims[1];
  g.k_w = f.dims[2];
  g.p = op.Params<DEPTHWISE_CONV2D_Params>();
  return g;
}

Status ValidateDepthwise(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, kInput), f = ops::InputTensor(m, op, kFilter),
                   out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(CheckFilterTensor(f));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(CheckNotInPlace(in, out));
  const DwGeom g = Geometry(m, op);
  const DEPTHWISE_CONV2D_Params& p = g.p;

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

  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.ch_mult, "ch_mult", 1, (int32_t)kMaxGeom));
  // in_c, ch_mult <= 65535: the product fits uint32.
  const uint32_t want_c = g.in_c * (uint32_t)p.ch_mult;
  if (g.out_c != want_c)
    return ops::Fail("output channels %u != in_channels * ch_mult = %u", (unsigned)g.out_c,
                     (unsigned)want_c);
  if (f.dims[0] != 1 || f.dims[3] != want_c)
    return ops::Fail("filter dims [%u,%u,%u,%u]: expected [1, kh, kw, in_channels * ch_mult = %u]",
                     (unsigned)f.dims[0], (unsigned)f.dims[1], (unsigned)f.dims[2],
                     (unsigned)f.dims[3], (unsigned)want_c);

  ESPNN_RETURN_IF_ERROR(CheckConvAxis("height", "stride_h", p.stride_h, "dilation_h", p.dilation_h,
                                      "pad_top", p.pad_top, g.in_h, g.k_h, g.out_h));
  ESPNN_RETURN_IF_ERROR(CheckConvAxis("width", "stride_w", p.stride_w, "dilation_w", p.dilation_w,
                                      "pad_left", p.pad_left, g.in_w, g.k_w, g.out_w));
  ESPNN_RETURN_IF_ERROR(CheckOffsets(p.input_offset, p.output_offset, p.act_min, p.act_max));
  return CheckRequantConstants(m, op, g.out_c);
}

struct EspnnDwArgs {
  data_dims_t in_dims, filter_dims, out_dims;
  dw_conv_params_t params;
};

EspnnDwArgs EspnnArgs(const DwGeom& g) {
  EspnnDwArgs a;
  a.in_dims = {(int32_t)g.in_w, (int32_t)g.in_h, (int32_t)g.in_c, 1};
  a.filter_dims = {(int32_t)g.k_w, (int32_t)g.k_h, (int32_t)g.out_c, 0};
  a.out_dims = {(int32_t)g.out_w, (int32_t)g.out_h, (int32_t)g.out_c, 1};
  a.params.in_offset = g.p.input_offset;
  a.params.out_offset = g.p.output_offset;
  a.params.ch_mult = g.p.ch_mult;
  a.params.stride = {g.p.stride_w, g.p.stride_h};
  a.params.padding = {g.p.pad_left, g.p.pad_top};
  a.params.dilation = {1, 1};
  a.params.activation = {g.p.act_min, g.p.act_max};
  return a;
}

// Margin added to ESP-NN's depthwise scratch size. ESP-NN 1.2.3's S3 size
// function under-allocates in a known case (reference §5.3 item 2); that
// case is routed to ANSI above (the shortfall there is far larger than any
// small margin), and these 16 bytes guard against off-by-alignment
// shortfalls in the remaining paths.
constexpr uint32_t kDepthwiseScratchMargin = 16;

uint32_t DepthwiseScratchBytes(const Model& m, const OpInfo& op) {
  const DwGeom g = Geometry(m, op);
  if (g.uses_own_kernel()) return 0;
  EspnnDwArgs a = EspnnArgs(g);
  a.params.in_offset = 0;  // as esp-tflite-micro sizes it
  a.params.activation = {-128, 127};
  const int bytes =
      esp_nn_get_depthwise_conv_scratch_size(&a.in_dims, &a.filter_dims, &a.out_dims, &a.params);
  if (bytes < 0 || (uint32_t)bytes > UINT32_MAX - kDepthwiseScratchMargin) return UINT32_MAX;
  return (uint32_t)bytes + kDepthwiseScratchMargin;
}

Status EvalDepthwise(const OpInfo& op, const EvalContext& ctx) {
  const DwGeom g = Geometry(*ctx.model, op);
  const int8_t* input = (const int8_t*)ctx.in(op.inputs[kInput]);
  const int8_t* filter = (const int8_t*)ctx.in(op.inputs[kFilter]);
  const int32_t* bias = (const int32_t*)ctx.in(op.inputs[kBias]);  // null when absent
  int32_t* mult = (int32_t*)ctx.in(op.inputs[kMult]);  // ESP-NN only reads these
  int32_t* shift = (int32_t*)ctx.in(op.inputs[kShift]);
  int8_t* output = (int8_t*)ctx.out(op.outputs[0]);

  if (g.uses_own_kernel()) {
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
    // Depthwise = groups of one input channel and ch_mult outputs; the
    // filter is [kh][kw][C*M], so output o's tap (ky, kx) is at
    // (ky*kw + kx)*C*M + o.
    d.group_in_c = 1;
    d.outs_per_group = (uint32_t)g.p.ch_mult;
    d.fs_o = 1;
    d.fs_x = g.out_c;
    d.fs_y = g.k_w * g.out_c;
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

  const EspnnDwArgs a = EspnnArgs(g);
  quant_data_t quant;
  quant.shift = shift;
  quant.mult = mult;
  const uint32_t in_image = g.in_h * g.in_w * g.in_c, out_image = g.out_h * g.out_w * g.out_c;
  const bool scratch_defect = kS3OptimizedDepthwise && g.s3_scratch_defect();
  for (uint32_t n = 0; n < g.batch; ++n) {
    const int8_t* in_n = input + n * in_image;
    int8_t* out_n = output + n * out_image;
    // Later images of a batch may be unaligned; the S3 paths assume alignment.
    const bool aligned = (((uintptr_t)in_n | (uintptr_t)out_n) & 15u) == 0;
    if (scratch_defect || !aligned) {
      esp_nn_depthwise_conv_s8_ansi(&a.in_dims, in_n, &a.filter_dims, filter, bias, &a.out_dims,
                                    out_n, &a.params, &quant);
    } else {
      // ESP-NN keeps the scratch pointer in a global: set it before each call.
      esp_nn_set_depthwise_conv_scratch_buf(ctx.scratch);
      esp_nn_depthwise_conv_s8(&a.in_dims, in_n, &a.filter_dims, filter, bias, &a.out_dims, out_n,
                               &a.params, &quant);
    }
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kDepthwiseConv2dKernel = {ValidateDepthwise, DepthwiseScratchBytes,
                                                EvalDepthwise};

}  // namespace espnn
