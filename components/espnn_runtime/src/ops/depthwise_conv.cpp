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
// * the 3x3 / ch_mult 1 / C % 16 == 0 layers whose pads are neither (0,0)
//   nor (1,1): ESP-NN 1.2.3's S3 build dispatches them to a path that
//   writes more scratch than esp_nn_get_depthwise_conv_scratch_size returns
//   (several KB in the reference's example, reference §5.3 item 2, upstream
//   issue #30). They are "staged": the image, with its padding written out
//   as the input zero point, is copied into scratch and run with pads (0,0),
//   ESP-NN's fast s8 3x3 path on the S3 (a skipped tap and a zero-point tap
//   both add 0, so the result is the same to the bit). Interior bands of a
//   fused region have exactly these pads (0 above, the layer's pad at the
//   sides), so this is the route most fused depthwise layers take. Every
//   target stages them, not only the S3, so the host tests run this code;
//   elsewhere it costs one copy of the image;
// * on an optimized ESP32-S3 build, the ch_mult 1 / C % 8 == 0 layers with a
//   kernel other than 3x3 whose int16 copies of filter and input exceed
//   48 KiB, when input_offset != 0 and a window reaches above or below the
//   image: ESP-NN 1.2.3 then converts the input one window of rows at a time
//   and fills a row outside the image with input_offset (an int8 0 after the
//   offset is added) where a skipped tap is needed, so each such tap adds
//   input_offset * weight (esp_nn_depthwise_conv_s8_esp32s3.c, the "Large
//   input" branch of the s16 mult1 path; its smaller-input branch, like
//   ANSI, skips those taps). MobileNetV3's 5x5 layers are such layers; they
//   also go to esp_nn_depthwise_conv_s8_ansi.
// Padding: top/left pads are given, the output size implies bottom/right,
// accepted in [0, extent-1] as for CONV2D.
#include <stdint.h>
#include <string.h>

#include "ops/band_loop.h"
#include "ops/conv_util.h"
#include "ops/espnn_api.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;
using namespace conv_util;

// ESP-NN's window origin is an int16_t.
constexpr uint32_t kMaxInt16Geom = 32767;

struct DwGeom : ConvShape {
  DEPTHWISE_CONV2D_Params p;
  bool dilated() const { return Dilated(*this, p); }
  bool beyond_int16() const {
    return in_h > kMaxInt16Geom || in_w > kMaxInt16Geom || (uint32_t)p.pad_top > kMaxInt16Geom ||
           (uint32_t)p.pad_left > kMaxInt16Geom;
  }
  bool uses_own_kernel() const { return dilated() || beyond_int16(); }
  // The geometry of ESP-NN 1.2.3's S3 scratch under-allocation (§5.3 item 2).
  bool s3_scratch_defect() const {
    return k_h == 3 && k_w == 3 && p.ch_mult == 1 && in_c % 16 == 0 &&
           !((p.pad_top == 0 && p.pad_left == 0) || (p.pad_top == 1 && p.pad_left == 1));
  }
  // ESP-NN's test: 2 * (filter_size + input_size) <= 48 * 1024 takes the
  // whole-tensor conversion (validate() bounds the dims by 65535).
  bool s3_tiled_pad_defect() const {
    const uint64_t s16_bytes = 2 * ((uint64_t)k_h * k_w * in_c + (uint64_t)in_h * in_w * in_c);
    const bool rows_outside =
        p.pad_top > 0 || (uint64_t)(out_h - 1) * p.stride_h + k_h > (uint64_t)p.pad_top + in_h;
    return p.ch_mult == 1 && in_c % 8 == 0 && !(k_h == 3 && k_w == 3) &&
           s16_bytes > 48 * 1024 && p.input_offset != 0 && rows_outside;
  }
};

// Where eval sends a layer (RouteDepthwise below).
enum class DwRoute { kOwnKernel, kStagedPadding, kAnsiTiledPadDefect, kEspnn };

DwGeom Geometry(const Model& m, const OpInfo& op) {
  return {ReadConvShape(m, op), op.Params<DEPTHWISE_CONV2D_Params>()};
}

// At run time: a band in a fused region has its own rows and pad_top.
DwGeom Geometry(const EvalContext& ctx, const OpInfo& op) {
  return {ReadConvShape(ctx, op), op.Params<DEPTHWISE_CONV2D_Params>()};
}

Status ValidateDepthwise(const Model& m, const OpInfo& op) {
  ESPNN_RETURN_IF_ERROR(CheckConvTensors(m, op));
  const DwGeom g = Geometry(m, op);
  const DEPTHWISE_CONV2D_Params& p = g.p;
  ESPNN_RETURN_IF_ERROR(CheckEspnnShapeLimits(g));

  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.ch_mult, "ch_mult", 1, (int32_t)kMaxGeom));
  // in_c, ch_mult <= 65535: the product fits uint32.
  const uint32_t want_c = g.in_c * (uint32_t)p.ch_mult;
  if (g.out_c != want_c)
    return ops::Fail("output channels %u != in_channels * ch_mult = %u", (unsigned)g.out_c,
                     (unsigned)want_c);
  if (g.filter_n != 1 || g.filter_c != want_c)
    return ops::Fail("filter dims [%u,%u,%u,%u]: expected [1, kh, kw, in_channels * ch_mult = %u]",
                     (unsigned)g.filter_n, (unsigned)g.k_h, (unsigned)g.k_w, (unsigned)g.filter_c,
                     (unsigned)want_c);

  ESPNN_RETURN_IF_ERROR(CheckConvWindow(g, p));
  ESPNN_RETURN_IF_ERROR(CheckOffsets(p));
  ESPNN_RETURN_IF_ERROR(CheckRequantConstants(m, op, g.out_c));
  return CheckAccumulatorRange(m, op, g.out_c, (uint64_t)g.k_h * g.k_w, 1, g.out_c, p.input_offset);
}

// filter_dims.channels = filter_c = C*M, which validate() made equal to out_c.
EspnnConvArgs<dw_conv_params_t> EspnnArgs(const DwGeom& g) {
  EspnnConvArgs<dw_conv_params_t> a = MakeEspnnConvArgs<dw_conv_params_t>(g, g.p);
  a.params.ch_mult = g.p.ch_mult;
  return a;
}

// Margin added to ESP-NN's depthwise scratch size. ESP-NN 1.2.3's S3 size
// function under-allocates in a known case (reference §5.3 item 2); that
// case is staged (below) so ESP-NN never sees it, and these 16 bytes guard
// against off-by-alignment shortfalls in the remaining paths.
constexpr uint32_t kDepthwiseScratchMargin = 16;

uint64_t Align16(uint64_t n) { return (n + 15u) & ~(uint64_t)15u; }

// ESP-NN's scratch for geometry g (UINT32_MAX when it cannot say).
uint64_t EspnnScratchBytes(const DwGeom& g) {
  auto a = EspnnArgs(g);
  a.params.in_offset = 0;  // as esp-tflite-micro sizes it
  a.params.activation = {-128, 127};
  const int bytes =
      esp_nn_get_depthwise_conv_scratch_size(&a.in_dims, &a.filter_dims, &a.out_dims, &a.params);
  return bytes < 0 ? (uint64_t)UINT32_MAX : (uint64_t)bytes + kDepthwiseScratchMargin;
}

// The staged-padding route: the geometry ESP-NN is given. The copy is as
// wide and tall as ESP-NN's pad-(0,0) path wants (out * stride + k - 1), so
// that path pads nothing of its own and reads the copy in place; the extra
// row and column a stride of 2 asks for hold the zero point and feed no
// output.
DwGeom StagedGeometry(const DwGeom& g) {
  DwGeom s = g;
  s.in_h = g.out_h * (uint32_t)g.p.stride_h + g.k_h - 1;
  s.in_w = g.out_w * (uint32_t)g.p.stride_w + g.k_w - 1;
  s.p.pad_top = 0;
  s.p.pad_left = 0;
  return s;
}

// Scratch of the staged route: the copy, then ESP-NN's own scratch.
uint64_t StagedImageBytes(const DwGeom& s) { return Align16((uint64_t)s.in_h * s.in_w * s.in_c); }
uint64_t StagedScratchBytes(const DwGeom& g) {
  const DwGeom s = StagedGeometry(g);
  return StagedImageBytes(s) + EspnnScratchBytes(s);
}

DwRoute RouteDepthwise(const DwGeom& g, bool s3_optimized);

// Scratch for one call of geometry g, by the route it takes.
uint64_t CallScratchBytes(const DwGeom& g) {
  switch (RouteDepthwise(g, true)) {
    case DwRoute::kOwnKernel: return 0;
    case DwRoute::kStagedPadding: return StagedScratchBytes(g);
    default: return EspnnScratchBytes(g);
  }
}

// A band call of g in a fused region: at most `rows` output rows, top pad
// `pad_top` (0 inside the image), reading at most the rows those need.
DwGeom BandGeometry(const DwGeom& g, uint32_t rows, int32_t pad_top) {
  DwGeom b = g;
  b.out_h = rows < g.out_h ? rows : g.out_h;
  const uint64_t reads = (uint64_t)(b.out_h - 1) * (uint32_t)g.p.stride_h + g.k_h;
  b.in_h = reads < g.in_h ? (uint32_t)reads : g.in_h;
  b.p.pad_top = pad_top;
  return b;
}

// The whole layer, and in a fused region its band calls too: an interior
// band has pads (0, pad_left), which may take the staged route although the
// whole layer does not, and its copy is sized by the band's rows.
uint32_t DepthwiseScratchBytes(const Model& m, const OpInfo& op) {
  const DwGeom g = Geometry(m, op);
  uint64_t need = CallScratchBytes(g);
  const uint32_t rows = band::MaxCallRows(m, op.index);
  if (rows > 0) {
    const uint64_t interior = CallScratchBytes(BandGeometry(g, rows, 0));
    const uint64_t first = CallScratchBytes(BandGeometry(g, rows, g.p.pad_top));
    need = need > interior ? need : interior;
    need = need > first ? need : first;
  }
  return need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
}

// Copies image `in` of g into `dst` (StagedGeometry(g)'s extent) with the
// padding, and whatever lies beyond the last window, as `pad_value`.
void StageImage(const DwGeom& g, const DwGeom& s, const int8_t* in, int8_t* dst, int8_t pad_value) {
  const size_t c = g.in_c, row = (size_t)s.in_w * c;
  const uint32_t left = (uint32_t)g.p.pad_left < s.in_w ? (uint32_t)g.p.pad_left : s.in_w;
  const uint32_t cols = s.in_w - left < g.in_w ? s.in_w - left : g.in_w;
  for (uint32_t y = 0; y < s.in_h; ++y, dst += row) {
    const int64_t src_y = (int64_t)y - g.p.pad_top;
    if (src_y < 0 || src_y >= (int64_t)g.in_h) {
      memset(dst, pad_value, row);
      continue;
    }
    memset(dst, pad_value, left * c);
    memcpy(dst + left * c, in + (size_t)src_y * g.in_w * c, cols * c);
    memset(dst + (left + cols) * c, pad_value, row - (left + cols) * c);
  }
}

// The route of a depthwise layer (see the file comment); `s3_optimized`: as
// an optimized ESP32-S3 build routes it (eval passes kEspnnS3Optimized, the
// host's description and the lowering's one-channel stem choice true).
// The staged route is taken on every target (the file comment says why).
DwRoute RouteDepthwise(const DwGeom& g, bool s3_optimized) {
  if (g.uses_own_kernel()) return DwRoute::kOwnKernel;
  if (g.s3_scratch_defect()) return DwRoute::kStagedPadding;
  if (s3_optimized && g.s3_tiled_pad_defect()) return DwRoute::kAnsiTiledPadDefect;
  return DwRoute::kEspnn;
}

Status EvalDepthwise(const OpInfo& op, const EvalContext& ctx) {
  const DwGeom g = Geometry(ctx, op);
  const ConvData d = ReadConvData(op, ctx);
  const DwRoute route = RouteDepthwise(g, kEspnnS3Optimized);
  if (route == DwRoute::kOwnKernel) {
    // Depthwise = groups of one input channel and ch_mult outputs; the
    // filter is [kh][kw][C*M], so output o's tap (ky, kx) is at
    // (ky*kw + kx)*C*M + o.
    DirectConv(d, g, {1, (uint32_t)g.p.ch_mult, 1, g.k_w * g.out_c, g.out_c}, g.p);
    return Status::Ok();
  }

  const auto a = EspnnArgs(g);
  quant_data_t quant = EspnnQuant(d);
  if (route == DwRoute::kStagedPadding) {
    const DwGeom s = StagedGeometry(g);
    const uint64_t need = StagedScratchBytes(g);
    if (need > ctx.scratch_bytes)
      return Status::Error(StatusCode::kInvalidArgument,
                           "depthwise: staging the padding needs %lu bytes of scratch, %u given",
                           (unsigned long)need, (unsigned)ctx.scratch_bytes);
    int8_t* staged = (int8_t*)ctx.scratch;
    const auto sa = EspnnArgs(s);
    const int8_t pad_value = (int8_t)(-g.p.input_offset);  // the input zero point
    ForEachImage(g, d, [&](const int8_t* in_n, int8_t* out_n, bool aligned) {
      if (!aligned) {
        esp_nn_depthwise_conv_s8_ansi(&a.in_dims, in_n, &a.filter_dims, d.filter, d.bias, &a.out_dims, out_n,
                                      &a.params, &quant);
        return;
      }
      StageImage(g, s, in_n, staged, pad_value);
      esp_nn_set_depthwise_conv_scratch_buf(ctx.scratch + StagedImageBytes(s));
      esp_nn_depthwise_conv_s8(&sa.in_dims, staged, &sa.filter_dims, d.filter, d.bias, &sa.out_dims, out_n,
                               &sa.params, &quant);
    });
    return Status::Ok();
  }
  const bool s3_defect = route != DwRoute::kEspnn;
  ForEachImage(g, d, [&](const int8_t* in_n, int8_t* out_n, bool aligned) {
    if (s3_defect || !aligned) {
      esp_nn_depthwise_conv_s8_ansi(&a.in_dims, in_n, &a.filter_dims, d.filter, d.bias,
                                    &a.out_dims, out_n, &a.params, &quant);
    } else {
      // ESP-NN keeps the scratch pointer in a global: set it before each call.
      esp_nn_set_depthwise_conv_scratch_buf(ctx.scratch);
      esp_nn_depthwise_conv_s8(&a.in_dims, in_n, &a.filter_dims, d.filter, d.bias, &a.out_dims,
                               out_n, &a.params, &quant);
    }
  });
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
// The route of a layer of geometry `g`, `aligned` of whose images start
// 16-byte aligned (input and output).
void DescribeGeometry(const DwGeom& g, uint32_t aligned, S3Route* r) {
  switch (RouteDepthwise(g, true)) {
    case DwRoute::kOwnKernel:
      if (g.dilated())
        SetS3Route(r, false, 0.0, "interpreter direct conv", "dilation != 1: ESP-NN ignores dilation");
      else
        SetS3Route(r, false, 0.0, "interpreter direct conv", "geometry beyond ESP-NN's int16 window origin");
      return;
    case DwRoute::kStagedPadding:
      if (aligned == 0) break;  // misaligned images go to ANSI, as below
      SetS3Route(r, true, (double)aligned / g.batch, "depthwise s8 mult1 3x3 asm (staged padding)",
                 "3x3, ch %% 16 == 0, pads not (0,0)/(1,1): ESP-NN's S3 scratch defect (§5.3 item 2); "
                 "the padding is written into a scratch copy, run with pads (0,0)");
      return;
    case DwRoute::kAnsiTiledPadDefect:
      SetS3Route(r, false, 0.0, "esp_nn_depthwise_conv_s8_ansi",
                 "not 3x3, int16 copies > 48 KiB, input_offset != 0, rows outside the image: "
                 "S3 tiled-padding defect -> ANSI");
      return;
    case DwRoute::kEspnn: break;
  }
  if (aligned == 0) {
    SetS3Route(r, false, 0.0, "esp_nn_depthwise_conv_s8_ansi", "image pointers not 16-byte aligned -> ANSI");
    return;
  }
  // ESP-NN 1.2.3's S3 esp_nn_depthwise_conv_s8 dispatch.
  const double share = (double)aligned / g.batch;
  const int32_t m = g.p.ch_mult;
  const uint32_t ch = g.in_c;
  if (m == 1 && ch % 8 == 0)
    SetS3Route(r, true, share, "depthwise s8/s16 mult1 asm", "ch_mult 1, ch %% 8 == 0");
  else if (m == 1 && ch > 3)
    SetS3Route(r, true, share, "depthwise s16 mult1 asm (channels padded to 8)", "ch_mult 1, ch > 3, ch %% 8 != 0");
  else if (m % 8 == 0)
    SetS3Route(r, true, share, "depthwise s16 mult8 asm", "ch_mult %% 8 == 0");
  else if (m % 4 == 0)
    SetS3Route(r, true, share, "depthwise s16 mult4 asm", "ch_mult %% 4 == 0");
  else
    SetS3Route(r, false, 0.0, "depthwise generic _opt C", "ch_mult %d with %u channels: no S3 asm path", (int)m,
               (unsigned)ch);
}

void DescribeDepthwise(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  const DwGeom g = Geometry(ctx, op);
  uint32_t aligned = 0;
  ForEachImage(g, ReadConvData(op, ctx), [&](const int8_t*, int8_t*, bool ok) { aligned += ok; });
  DescribeGeometry(g, aligned, r);
}

const char* const kDepthwiseS3Kernels[] = {
    "interpreter direct conv", "esp_nn_depthwise_conv_s8_ansi", "depthwise s8 mult1 3x3 asm (staged padding)",
    "depthwise s8/s16 mult1 asm",
    "depthwise s16 mult1 asm (channels padded to 8)", "depthwise s16 mult8 asm", "depthwise s16 mult4 asm",
    "depthwise generic _opt C", nullptr};

const S3RouteRule kDepthwiseS3Rule = {
    "§5.1 depthwise: ch_mult 1 and ch % 8 == 0 -> s8/s16 asm paths (3x3 with ch % 16 == 0 and pad (1,1)/(0,0): "
    "s8 padded asm; 3x3 ch >= 12: channel-padded s8 asm; ch == 8: s16 3x3; other kernels: s16 mult1); ch_mult 1, "
    "ch > 3, ch % 8 != 0 -> channels padded to 8, s16 mult1; ch_mult % 8 == 0 -> s16 mult8; ch_mult % 4 == 0 -> "
    "s16 mult4; everything else -> generic _opt C. §5.3 item 2 (scratch under-allocation for 3x3, ch % 16 == 0, "
    "pads other than (0,0)/(1,1)) [runtime: the padding is staged in scratch, pads (0,0)]. The row-tiled s16 mult1 path (not 3x3, int16 copies > "
    "48 KiB) fills rows outside the image with input_offset [runtime: with input_offset != 0 -> ANSI]. Dilation "
    "and int16-overflowing geometry [runtime: own direct loop]. Misaligned images -> ANSI.",
    kDepthwiseS3Kernels, DescribeDepthwise};
#endif

}  // namespace

#ifdef ESPNN_DESCRIBE_S3_ROUTES
S3Route DescribeS3DepthwiseLayer(const conv_util::ConvShape& shape, const DEPTHWISE_CONV2D_Params& params,
                                 const char** route_name) {
  const DwGeom g = {shape, params};
  static const char* const kNames[] = {"own_kernel", "staged_padding", "ansi_tiled_pad_defect", "espnn"};
  *route_name = kNames[(int)RouteDepthwise(g, true)];
  S3Route r;
  DescribeGeometry(g, g.batch, &r);
  return r;
}
#endif

extern const OpKernel kDepthwiseConv2dKernel = {ValidateDepthwise, DepthwiseScratchBytes,
                                                EvalDepthwise ESPNN_S3_ROUTE(kDepthwiseS3Rule)};

}  // namespace espnn
