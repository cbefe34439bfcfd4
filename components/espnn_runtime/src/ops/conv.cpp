// CONV2D: int8 2-D convolution, NHWC input [N,H,W,Cin], OHWI filter
// [Cout,kh,kw,Cin/groups], per-channel mult/shift, optional int32 bias.
//
// Routing (validate() accepts all of these):
// * groups == 1, dilation 1 (or a 1-tap axis) -> esp_nn_conv_s8, one image
//   per call, filter_dims.channels = Cin.
// * 1 < groups, dilation 1 -> "staged" per group: each group's input
//   channels are gathered into scratch and run through the dense
//   esp_nn_conv_s8 (filter_dims.channels = Cin/groups = the gathered
//   channels, so ESP32-S3's SIMD paths apply), and its output channels are
//   scattered back. ESP-NN itself has no fast grouped path: its S3 and
//   generic dispatchers fall back to ANSI (and the generic 1x1 computes
//   grouped 1x1 wrongly), so a dense kernel is never given a grouped filter.
// * dilation d > 1 with stride 1 on every dilated axis, groups == 1 ->
//   staged per phase (space-to-batch): output rows (cols) o = d*i + a only
//   read input rows a + d*r, so for each phase (a, b) the sub-grid of the
//   zero-point-padded input is gathered and run through the dense kernel with
//   dilation 1, and its outputs are scattered to rows d*i + a, cols d*j + b.
//   ESP-NN ignores the dilation field, so it never sees a dilated call.
// * otherwise (dilated and grouped, or dilated with stride > 1 on that axis)
//   -> the interpreter's own direct convolution, same arithmetic.
//
// Staging gathers a band of output rows at a time, with the padding written
// as the input zero point, so the staged calls have no padding of their own
// (taps in the padding contribute (zp + input_offset) * w = 0, the same as
// ESP-NN skipping them: bit-exact) and the S3 padding defect below cannot
// occur. The band height keeps the gathered input and the band's output
// within kStagingBudget bytes of scratch (at least one row).
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
#include <string.h>

#include "ops/conv_util.h"
#include "ops/espnn_api.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;
using namespace conv_util;

struct ConvGeom : ConvShape {
  CONV2D_Params p;
  bool dilated() const { return Dilated(*this, p); }
  bool grouped() const { return p.groups != 1; }
  bool uses_espnn_dense() const { return !dilated() && !grouped(); }
  // An axis whose taps are spread (k > 1, dilation > 1) is split into phases.
  bool phased_h() const { return k_h > 1 && p.dilation_h != 1; }
  bool phased_w() const { return k_w > 1 && p.dilation_w != 1; }
  bool staged() const {
    if (grouped()) return !dilated();
    return dilated() && (!phased_h() || p.stride_h == 1) && (!phased_w() || p.stride_w == 1);
  }
};

// Scratch the staged routes may use for the gathered input and the staged
// output of one band (at least one output row whatever this says).
constexpr uint32_t kStagingBudget = 16u * 1024u;

uint32_t Align16(uint64_t n) { return (uint32_t)((n + 15u) & ~(uint64_t)15u); }

// One axis of a staged call: `phases` sub-grids (the dilation, or 1), the
// stride and taps of the staged (undilated) conv, and for phase `a` how
// many outputs it has and where its rows sit in the padded input.
struct StagedAxis {
  uint32_t phases, stride, k, out;
  int32_t pad;
  bool phased;
  StagedAxis(uint32_t k_, int32_t dil, int32_t stride_, int32_t pad_, uint32_t out_, bool phased_)
      : phases(phased_ ? (uint32_t)dil : 1u), stride(phased_ ? 1u : (uint32_t)stride_), k(k_),
        out(out_), pad(pad_), phased(phased_) {}
  uint32_t outputs(uint32_t a) const { return out > a ? (out - a + phases - 1) / phases : 0u; }
  // Phases that have outputs: a dilation larger than the output extent
  // (legal with one tap) leaves the rest empty, and looping over them would
  // cost dilation iterations per call.
  uint32_t live_phases() const { return phases < out ? phases : out; }
  // Staged-input extent for `n` staged outputs: undilated taps over them.
  uint32_t extent(uint32_t n) const { return n == 0 ? 0u : (n - 1) * stride + k; }
  // Padded-input coordinate of staged-input index r for phase a, band start i0.
  int64_t source(uint32_t a, uint32_t i0, uint32_t r) const {
    return (int64_t)phases * ((int64_t)i0 * stride + r) + a - pad;
  }
};

StagedAxis AxisH(const ConvGeom& g) {
  return {g.k_h, g.p.dilation_h, g.p.stride_h, g.p.pad_top, g.out_h, g.phased_h()};
}
StagedAxis AxisW(const ConvGeom& g) {
  return {g.k_w, g.p.dilation_w, g.p.stride_w, g.p.pad_left, g.out_w, g.phased_w()};
}

// The staged calls' channel counts: per group (grouped) or all (phased).
uint32_t StagedInC(const ConvGeom& g) { return g.filter_c; }
uint32_t StagedOutC(const ConvGeom& g) { return g.out_c / (uint32_t)g.p.groups; }

// Bytes of the gathered input and staged output of a band of `rows` output rows.
uint64_t BandBytes(const ConvGeom& g, uint32_t rows) {
  const StagedAxis h = AxisH(g), w = AxisW(g);
  const uint32_t n_w = w.outputs(0);
  return (uint64_t)Align16((uint64_t)h.extent(rows) * w.extent(n_w) * StagedInC(g)) +
         Align16((uint64_t)rows * n_w * StagedOutC(g));
}

// Output rows per staged band: the most whose gathered input and output fit
// the budget, at least 1, at most the rows of the largest phase. BandBytes
// grows linearly in rows (plus at most 30 bytes of alignment), so the
// estimate below is at most a few rows short; the loop closes the gap. It
// runs at every invoke (no per-op state is kept), so it must stay O(1)-ish.
uint32_t BandRows(const ConvGeom& g) {
  const StagedAxis h = AxisH(g), w = AxisW(g);
  const uint32_t max_rows = h.outputs(0);
  const uint64_t in_row = (uint64_t)w.extent(w.outputs(0)) * StagedInC(g);  // one gathered input row
  const uint64_t per_row = h.stride * in_row + (uint64_t)w.outputs(0) * StagedOutC(g);
  const uint64_t fixed = (uint64_t)h.k * in_row + 30u;  // rows = 1 ... plus worst-case alignment
  uint64_t rows = 1;
  if (kStagingBudget > fixed && per_row > 0) rows = 1 + (kStagingBudget - fixed) / per_row;
  if (rows > max_rows) rows = max_rows > 0 ? max_rows : 1;
  while (rows < max_rows && BandBytes(g, (uint32_t)rows + 1) <= kStagingBudget) ++rows;
  while (rows > 1 && BandBytes(g, (uint32_t)rows) > kStagingBudget) --rows;
  return (uint32_t)rows;
}

// The dense ESP-NN call of one staged band: gathered input [rows_in, cols_in, Cs],
// no padding, the staged strides, output [rows, n_w, Os].
EspnnConvArgs<conv_params_t> StagedArgs(const ConvGeom& g, uint32_t rows, uint32_t n_w) {
  const StagedAxis h = AxisH(g), w = AxisW(g);
  ConvGeom s = g;
  s.in_h = h.extent(rows);
  s.in_w = w.extent(n_w);
  s.in_c = StagedInC(g);
  s.out_h = rows;
  s.out_w = n_w;
  s.out_c = StagedOutC(g);
  s.filter_n = s.out_c;
  CONV2D_Params p = g.p;
  p.pad_top = p.pad_left = 0;
  p.stride_h = (int32_t)h.stride;
  p.stride_w = (int32_t)w.stride;
  return MakeEspnnConvArgs<conv_params_t>(s, p);
}

int32_t EspnnScratch(EspnnConvArgs<conv_params_t> a) {
  a.params.in_offset = 0;
  a.params.activation = {-128, 127};
  return esp_nn_get_conv_scratch_size(&a.in_dims, &a.filter_dims, &a.out_dims, &a.params);
}

// Scratch of a staged conv: ESP-NN's own (for the largest band), then the
// gathered input, then the staged output, each 16-byte aligned. At run time
// the two staging buffers are placed at the end of the whole scratch buffer
// (ctx.scratch_bytes, at least this op's total), so ESP-NN's part need not be
// asked for again in eval.
struct StagedScratch {
  uint32_t espnn, input, output;
  uint64_t total() const { return (uint64_t)espnn + input + output; }
};

StagedScratch StagedScratchLayout(const ConvGeom& g) {
  const StagedAxis h = AxisH(g), w = AxisW(g);
  const uint32_t rows = BandRows(g), n_w = w.outputs(0);
  const int32_t espnn = EspnnScratch(StagedArgs(g, rows, n_w));
  return {espnn < 0 ? UINT32_MAX / 4 : Align16((uint32_t)espnn),
          Align16((uint64_t)h.extent(rows) * w.extent(n_w) * StagedInC(g)),
          Align16((uint64_t)rows * n_w * StagedOutC(g))};
}

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

// The dense path: ESP-NN's scratch, sized as esp-tflite-micro sizes it (real
// dims and padding, in_offset 0, activation [-128, 127]). Staged paths: their
// layout above. The direct convolution needs none.
uint32_t ConvScratchBytes(const Model& m, const OpInfo& op) {
  const ConvGeom g = Geometry(m, op);
  if (g.staged()) {
    const uint64_t total = StagedScratchLayout(g).total();
    return total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
  }
  if (!g.uses_espnn_dense()) return 0;
  const int bytes = EspnnScratch(EspnnArgs(g));
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

// Grouped or dilated through the dense kernel (see the file comment): per
// image, group and phase, bands of output rows gathered, convolved and
// scattered.
void EvalStaged(const ConvGeom& g, const ConvData& d, const EvalContext& ctx) {
  const StagedAxis h = AxisH(g), w = AxisW(g);
  const uint32_t band = BandRows(g), cs = StagedInC(g), os = StagedOutC(g);
  const uint32_t input_bytes = Align16((uint64_t)h.extent(band) * w.extent(w.outputs(0)) * cs);
  const uint32_t output_bytes = Align16((uint64_t)band * w.outputs(0) * os);
  // ctx.scratch_bytes is a multiple of 16 and >= espnn + input + output of this op (ConvScratchBytes).
  int8_t* staged = (int8_t*)ctx.scratch + (ctx.scratch_bytes & ~15u) - output_bytes;
  int8_t* gathered = staged - input_bytes;
  const uint32_t groups = (uint32_t)g.p.groups;
  const int8_t pad_value = (int8_t)(-g.p.input_offset);  // the input zero point: contributes 0
  const size_t in_row = (size_t)g.in_w * g.in_c, out_row = (size_t)g.out_w * g.out_c;
  const size_t filter_group = (size_t)os * g.k_h * g.k_w * cs;
  for (uint32_t n = 0; n < g.batch; ++n) {
    const int8_t* in_n = d.input + (size_t)n * g.in_h * in_row;
    int8_t* out_n = d.output + (size_t)n * g.out_h * out_row;
    for (uint32_t grp = 0; grp < groups; ++grp) {
      quant_data_t quant;
      quant.mult = d.mult + grp * os;
      quant.shift = d.shift + grp * os;
      const int8_t* filter = d.filter + grp * filter_group;
      const int32_t* bias = d.bias ? d.bias + grp * os : nullptr;
      for (uint32_t a = 0; a < h.live_phases(); ++a) {
        const uint32_t n_h = h.outputs(a);
        for (uint32_t b = 0; b < w.live_phases(); ++b) {
          const uint32_t n_w = w.outputs(b);
          if (n_h == 0 || n_w == 0) continue;
          for (uint32_t i0 = 0; i0 < n_h; i0 += band) {
            const uint32_t rows = n_h - i0 < band ? n_h - i0 : band;
            const uint32_t rows_in = h.extent(rows), cols_in = w.extent(n_w);
            // Gather this group's channels of the band's (phase) rows and
            // columns, the padding as the zero point.
            for (uint32_t r = 0; r < rows_in; ++r) {
              const int64_t y = h.source(a, i0, r);
              for (uint32_t c = 0; c < cols_in; ++c) {
                const int64_t x = w.source(b, 0, c);
                int8_t* dst = gathered + ((size_t)r * cols_in + c) * cs;
                if (y < 0 || y >= (int64_t)g.in_h || x < 0 || x >= (int64_t)g.in_w) {
                  memset(dst, (uint8_t)pad_value, cs);
                } else {
                  memcpy(dst, in_n + (size_t)y * in_row + (size_t)x * g.in_c + grp * cs, cs);
                }
              }
            }
            const auto args = StagedArgs(g, rows, n_w);
            esp_nn_set_conv_scratch_buf(ctx.scratch);
            esp_nn_conv_s8(&args.in_dims, gathered, &args.filter_dims, filter, bias, &args.out_dims, staged,
                           &args.params, &quant);
            // Scatter to output rows phases*(i0+t)+a, columns phases*j+b, this group's channels.
            for (uint32_t t = 0; t < rows; ++t) {
              const size_t oy = (size_t)h.phases * (i0 + t) + a;
              for (uint32_t j = 0; j < n_w; ++j) {
                const size_t ox = (size_t)w.phases * j + b;
                memcpy(out_n + oy * out_row + ox * g.out_c + grp * os, staged + ((size_t)t * n_w + j) * os, os);
              }
            }
          }
        }
      }
    }
  }
}

// The route of a conv (see the file comment); `s3_optimized`: as an
// optimized ESP32-S3 build routes it (eval passes kEspnnS3Optimized, the
// host's description true).
enum class ConvRoute { kStaged, kDirect, kAnsiPaddingDefect, kEspnn };

ConvRoute RouteConv(const ConvGeom& g, bool s3_optimized) {
  if (g.staged()) return ConvRoute::kStaged;
  if (g.dilated()) return ConvRoute::kDirect;
  if (s3_optimized && S3PaddingDefect(g)) return ConvRoute::kAnsiPaddingDefect;
  return ConvRoute::kEspnn;
}

Status EvalConv(const OpInfo& op, const EvalContext& ctx) {
  const ConvGeom g = Geometry(ctx, op);
  const ConvData d = ReadConvData(op, ctx);
  const ConvRoute route = RouteConv(g, kEspnnS3Optimized);
  if (route == ConvRoute::kStaged) {
    EvalStaged(g, d, ctx);
    return Status::Ok();
  }
  if (route == ConvRoute::kDirect) {
    // OHWI filter: output o's tap (ky, kx, i) at ((o*kh + ky)*kw + kx)*Cg + i.
    const uint32_t cg = g.filter_c;
    DirectConv(d, g, {cg, g.out_c / (uint32_t)g.p.groups, g.k_h * g.k_w * cg, g.k_w * cg, cg}, g.p);
    return Status::Ok();
  }

  const auto a = EspnnArgs(g);
  quant_data_t quant = EspnnQuant(d);
  const bool padding_defect = route == ConvRoute::kAnsiPaddingDefect;
  ForEachImage(g, d, [&](const int8_t* in_n, int8_t* out_n, bool aligned) {
    if (padding_defect || !aligned) {
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

#ifdef ESPNN_DESCRIBE_S3_ROUTES
// ESP-NN 1.2.3's S3 esp_nn_conv_s8 on one dense call of `in_c` input channels
// (its dispatcher, in this order): 1x1, pad 0, stride 1 -> mult8_1x1 asm when
// in_ch % 8 == 0, else C with inline-asm QACC MACs (scalar tail for the
// in_ch remainder and the last W*H % 8 pixels); fw*in_ch < 16 and
// fw*fh*in_ch >= 16 -> im2col + ACCX dot product; else the general asm
// (filter rows zero-padded to 16). `share`: the MACs that reach it.
void DescribeEspnnConv(S3Route* r, double share, uint32_t kh, uint32_t kw, uint32_t in_c, int32_t stride_h,
                       int32_t stride_w, int32_t pad_top, int32_t pad_left, uint32_t out_h, uint32_t out_w,
                       const char* prefix) {
  if (kh == 1 && kw == 1 && pad_top == 0 && pad_left == 0 && stride_h == 1 && stride_w == 1) {
    if (in_c % 8 == 0) {
      SetS3Route(r, true, share, "esp_nn_conv_s8_mult8_1x1_esp32s3", "%s1x1, pad 0, stride 1, in_ch %% 8 == 0",
                 prefix);
      return;
    }
    const double pixels = (double)out_h * out_w;
    const double frac = share * (double)(in_c / 8 * 8) / in_c * (pixels - (double)((uint64_t)pixels % 8)) / pixels;
    SetS3Route(r, frac > 0, frac, "1x1 C + inline asm (QACC)",
               "%s1x1, in_ch %% 8 = %u: remainder channels and last W*H %% 8 pixels scalar", prefix,
               (unsigned)(in_c % 8));
    return;
  }
  if ((uint64_t)kw * in_c < 16 && (uint64_t)kw * kh * in_c >= 16) {
    SetS3Route(r, true, share, "conv im2col + ACCX", "%sfw*in_ch < 16 and fw*fh*in_ch >= 16: im2col", prefix);
    return;
  }
  SetS3Route(r, true, share, "conv general asm (esp32s3)", "%sgeneral S3 conv (filter rows padded to 16)", prefix);
}

void DescribeConv(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  const ConvGeom g = Geometry(ctx, op);
  switch (RouteConv(g, true)) {
    case ConvRoute::kDirect:
      SetS3Route(r, false, 0.0, "interpreter direct conv",
                 "dilated with groups or with stride > 1 on the dilated axis: ESP-NN ignores dilation");
      return;
    case ConvRoute::kStaged: {
      // Per phase / group, gathered into 16-aligned scratch, the dense kernel with pad 0.
      const StagedAxis h = AxisH(g), w = AxisW(g);
      char prefix[64];
      if (g.dilated())
        snprintf(prefix, sizeof prefix, "staged (dilation by phases): ");
      else
        snprintf(prefix, sizeof prefix, "staged (%d groups one by one): ", (int)g.p.groups);
      DescribeEspnnConv(r, 1.0, g.k_h, g.k_w, StagedInC(g), (int32_t)h.stride, (int32_t)w.stride, 0, 0, g.out_h,
                        g.out_w, prefix);
      return;
    }
    case ConvRoute::kAnsiPaddingDefect:
      SetS3Route(r, false, 0.0, "esp_nn_conv_s8_ansi",
                 "trailing pad > leading pad (S3 asymmetric-pad defect, §5.3 item 1) -> ANSI");
      return;
    case ConvRoute::kEspnn: break;
  }
  uint32_t aligned = 0;
  ForEachImage(g, ReadConvData(op, ctx), [&](const int8_t*, int8_t*, bool ok) { aligned += ok; });
  if (aligned == 0) {
    SetS3Route(r, false, 0.0, "esp_nn_conv_s8_ansi", "image pointers not 16-byte aligned -> ANSI");
    return;
  }
  DescribeEspnnConv(r, (double)aligned / g.batch, g.k_h, g.k_w, g.in_c, g.p.stride_h, g.p.stride_w, g.p.pad_top,
                    g.p.pad_left, g.out_h, g.out_w, "");
}

const char* const kConvS3Kernels[] = {
    "interpreter direct conv", "esp_nn_conv_s8_ansi", "esp_nn_conv_s8_mult8_1x1_esp32s3",
    "1x1 C + inline asm (QACC)", "conv im2col + ACCX", "conv general asm (esp32s3)", nullptr};

const S3RouteRule kConvS3Rule = {
    "§5.1 conv: (1) filt_dims.channels != in_ch -> ANSI, and ESP-NN ignores dilation [this runtime "
    "stages both: each group, or each phase of a dilation with stride 1 on the dilated axis, is gathered and run "
    "through the dense kernel; dilated and grouped, or dilated with a stride: its own direct loop]. (2) 1x1, pad "
    "0, stride 1: in_ch % 8 == 0 -> mult8_1x1 asm; else C + inline-asm 1x1 (QACC MACs, scalar tail for the in_ch "
    "remainder and the last W*H % 8 pixels). (4) fw*in_ch < 16 and fw*fh*in_ch >= 16 -> im2col + ACCX dot "
    "product. (5) otherwise the general asm (filter rows zero-padded to 16). §5.3 item 1: asymmetric "
    "padding with a non-zero leading pad whose trailing pad is larger -> wrong last row/column [runtime: "
    "S3PaddingDefect -> ANSI]. Misaligned images -> ANSI.",
    kConvS3Kernels, DescribeConv};
#endif

}  // namespace

extern const OpKernel kConv2dKernel = {ValidateConv, ConvScratchBytes, EvalConv ESPNN_S3_ROUTE(kConvS3Rule)};

}  // namespace espnn
