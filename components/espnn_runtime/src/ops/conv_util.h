// Shared pieces of the convolution family (conv.cpp, depthwise_conv.cpp,
// transpose_conv.cpp): the tensor geometry and its checks (tensors, ESP-NN's
// uint16 limits, grouping, window, offsets, requantization constants), the
// op's data pointers, ESP-NN's conv and depthwise call arguments (one image
// per call), and the interpreter's own direct convolution for what ESP-NN
// cannot compute (dilation; windows beyond ESP-NN's int16 origin
// arithmetic). Each op file keeps only what differs.
//
// Input slots shared by all three ops (xts3_format.h):
//   0 input  int8 [N,H,W,Cin] (NHWC)      1 filter int8, constant
//   2 bias   int32 [Cout], constant or absent   3 mult int32 [Cout], constant
//   4 shift  int32 [Cout], constant (signed exponent, positive = left)
#pragma once

#include <stdint.h>

#include "ops/band_loop.h"
#include "ops/espnn_api.h"
#include "ops/op_util.h"

namespace espnn {
namespace conv_util {

enum Slot : uint32_t { kInput = 0, kFilter = 1, kBias = 2, kMult = 3, kShift = 4 };

// Largest value ESP-NN's convolution code keeps when it narrows geometry to
// uint16_t. Also the bound for stride/pad/dilation of every op here, so that
// all index arithmetic below stays far inside int32.
constexpr uint32_t kMaxGeom = xts3::kMaxKernelDim;

// A tensor dimension (or parameter) that ESP-NN narrows to uint16_t.
inline Status ExpectKernelDim(uint32_t value, const char* what) {
  if (value > kMaxGeom)
    return ops::Fail("%s = %u exceeds %u (ESP-NN narrows convolution geometry to uint16)", what,
                     (unsigned)value, (unsigned)kMaxGeom);
  return Status::Ok();
}

// stride >= 1, dilation >= 1 and, for the conv and depthwise ops, one axis of
// the window: 0 <= pad < effective extent dil*(k-1)+1, and an output size that
// the window produces for some implicit bottom/right pad in [0, extent-1]:
//   out = (in + pad + pad_end - extent) / stride + 1   (floor division).
// `axis` is "height" or "width"; the other names are the XTS3 fields.
inline Status CheckConvAxis(const char* axis, const char* stride_name, int32_t stride,
                            const char* dil_name, int32_t dil, const char* pad_name, int32_t pad,
                            uint32_t in, uint32_t k, uint32_t out) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(stride, stride_name, 1, (int32_t)kMaxGeom));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(dil, dil_name, 1, (int32_t)kMaxGeom));
  const int64_t extent = (int64_t)dil * ((int64_t)k - 1) + 1;
  if (pad < 0 || (int64_t)pad >= extent)
    return ops::Fail("%s = %d is not in 0..%lld (must be < the effective kernel %s %lld)", pad_name,
                     (int)pad, (long long)(extent - 1), axis, (long long)extent);
  // The smallest end pad that leaves a non-negative numerator, then the
  // largest one (extent - 1): every size in between is reachable.
  const int64_t lead = (int64_t)in + pad - extent;
  const int64_t lo = (lead < 0 ? 0 : lead) / stride + 1;
  const int64_t hi = (lead + extent - 1) / stride + 1;
  if ((int64_t)out < lo || (int64_t)out > hi)
    return ops::Fail("output %s %u does not match input %s %u, kernel %u, stride %d, dilation %d, "
                     "%s %d (expected %lld..%lld)",
                     axis, (unsigned)out, axis, (unsigned)in, (unsigned)k, (int)stride, (int)dil,
                     pad_name, (int)pad, (long long)lo, (long long)hi);
  return Status::Ok();
}

// Bottom/right pad implied by the output size (may be negative when the last
// window ends before the image does).
inline int64_t ImpliedEndPad(uint32_t in, uint32_t k, uint32_t out, int32_t stride, int32_t dil,
                             int32_t pad) {
  const int64_t extent = (int64_t)dil * ((int64_t)k - 1) + 1;
  return ((int64_t)out - 1) * stride + extent - ((int64_t)in + pad);
}

// Offsets and activation clamp of the op's params struct P (ESP-NN
// convention: input_offset = -zp, so [-127, 128]; output_offset = +zp).
template <typename P>
Status CheckOffsets(const P& p) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input_offset, "input_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_offset, "output_offset", -128, 127));
  return ops::ExpectActivationRange(p.act_min, p.act_max);
}

// bias (optional), mult and shift: int32 constants with one entry per output
// channel. mult is a Q31 multiplier (>= 0); shift in [-31, 30] because the
// requantization computes x * (1 << shift) and divides by 2^-shift.
inline Status CheckRequantConstants(const Model& m, const OpInfo& op, uint32_t out_c) {
  if (op.inputs[kBias] != xts3::kNoTensor)
    ESPNN_RETURN_IF_ERROR(
        ops::ExpectConstVector(ops::InputTensor(m, op, kBias), "bias", xts3::DType::INT32, out_c));
  const TensorInfo mult = ops::InputTensor(m, op, kMult), shift = ops::InputTensor(m, op, kShift);
  ESPNN_RETURN_IF_ERROR(ops::ExpectConstVector(mult, "mult", xts3::DType::INT32, out_c));
  ESPNN_RETURN_IF_ERROR(ops::ExpectConstVector(shift, "shift", xts3::DType::INT32, out_c));
  const uint8_t* mp = m.constant_data(mult);
  const uint8_t* sp = m.constant_data(shift);
  for (uint32_t c = 0; c < out_c; ++c) {
    const int32_t mv = ops::LoadI32(mp, c), sv = ops::LoadI32(sp, c);
    if (mv < 0) return ops::Fail("mult[%u] = %d is negative", (unsigned)c, (int)mv);
    if (sv < -31 || sv > 30)
      return ops::Fail("shift[%u] = %d is not in -31..30", (unsigned)c, (int)sv);
  }
  return Status::Ok();
}

// The accumulator bound of ops::CheckAccumulatorRows for a conv's constant
// filter, bias and shifts. Output channel o reads the filter taps
// o * channel_stride + t * tap_stride, t < taps (conv and transposed conv:
// its row; depthwise: its column). For a transposed conv, all taps of the
// row bound what any output pixel sums.
inline Status CheckAccumulatorRange(const Model& m, const OpInfo& op, uint32_t out_c, uint64_t taps,
                                    uint64_t channel_stride, uint64_t tap_stride, int32_t input_offset) {
  const int8_t* w = (const int8_t*)m.constant_data(ops::InputTensor(m, op, kFilter));
  const uint8_t* bias =
      op.inputs[kBias] != xts3::kNoTensor ? m.constant_data(ops::InputTensor(m, op, kBias)) : nullptr;
  const uint8_t* shift = m.constant_data(ops::InputTensor(m, op, kShift));
  return ops::CheckAccumulatorRows(w, bias, shift, out_c, taps, channel_stride, tap_stride,
                                   input_offset, "output channel");
}

// The tensor geometry of the three ops: input [batch, in_h, in_w, in_c],
// output [batch, out_h, out_w, out_c] (NHWC) and filter
// [filter_n, k_h, k_w, filter_c], whose outer dims each op checks itself.
// Valid to read once CheckConvTensors passed (every tensor has rank 4).
struct ConvShape {
  uint32_t batch, in_h, in_w, in_c, out_h, out_w, out_c, filter_n, k_h, k_w, filter_c;
};

inline ConvShape ReadConvShape(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, kInput), f = ops::InputTensor(m, op, kFilter),
                   out = ops::OutputTensor(m, op, 0);
  return {in.dims[0],  in.dims[1], in.dims[2], in.dims[3], out.dims[1], out.dims[2],
          out.dims[3], f.dims[0],  f.dims[1],  f.dims[2],  f.dims[3]};
}

// The same, as the op sees it at run time (a band in a fused region has
// fewer rows: EvalContext::tensor).
inline ConvShape ReadConvShape(const EvalContext& ctx, const OpInfo& op) {
  const TensorInfo in = ctx.tensor(op.inputs[kInput]), f = ctx.tensor(op.inputs[kFilter]),
                   out = ctx.tensor(op.outputs[0]);
  return {in.dims[0],  in.dims[1], in.dims[2], in.dims[3], out.dims[1], out.dims[2],
          out.dims[3], f.dims[0],  f.dims[1],  f.dims[2],  f.dims[3]};
}

// Tensors of all three ops: int8 NHWC input and output of the same batch,
// and an int8 rank-4 constant filter with symmetric quantization (ESP-NN has
// no filter offset). The ops read their input while writing their output,
// so the two must not share arena bytes (except the last op of an IN_PLACE
// fused region, which writes through its staging buffer).
inline Status CheckConvTensors(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, kInput), f = ops::InputTensor(m, op, kFilter),
                   out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", xts3::DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(f, "filter", xts3::DType::INT8, 4));
  if (f.memory != xts3::Memory::CONSTANT) return ops::Fail("filter must be a constant");
  if (f.zero_point != 0)
    return ops::Fail("filter zero point %d: weights must be symmetric (0)", (int)f.zero_point);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", xts3::DType::INT8, 4));
  if (in.memory == xts3::Memory::ARENA) {
    const uint64_t a0 = in.offset, a1 = a0 + in.nbytes, b0 = out.offset, b1 = b0 + out.nbytes;
    if (a0 < b1 && b0 < a1 && !band::WritesThroughStaging(m, op))
      return ops::Fail("input and output overlap in the arena (the op cannot run in place)");
  }
  if (out.dims[0] != in.dims[0])
    return ops::Fail("output batch %u != input batch %u", (unsigned)out.dims[0],
                     (unsigned)in.dims[0]);
  return Status::Ok();
}

// Every dimension that ESP-NN's conv and depthwise kernels narrow to uint16.
inline Status CheckEspnnShapeLimits(const ConvShape& s) {
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(s.in_h, "input height"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(s.in_w, "input width"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(s.in_c, "input channels"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(s.out_h, "output height"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(s.out_w, "output width"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(s.out_c, "output channels"));
  ESPNN_RETURN_IF_ERROR(ExpectKernelDim(s.k_h, "filter height"));
  return ExpectKernelDim(s.k_w, "filter width");
}

// Grouped OHWI filter (CONV2D, TRANSPOSE_CONV2D): 1 <= groups <= max_groups,
// groups divides both channel counts, filter [out_c, kh, kw, in_c/groups].
inline Status CheckGroupedFilter(const ConvShape& s, int32_t groups_param, int32_t max_groups) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(groups_param, "groups", 1, max_groups));
  const uint32_t groups = (uint32_t)groups_param;
  if (s.in_c % groups != 0)
    return ops::Fail("groups = %u does not divide input channels %u", (unsigned)groups,
                     (unsigned)s.in_c);
  if (s.out_c % groups != 0)
    return ops::Fail("groups = %u does not divide output channels %u", (unsigned)groups,
                     (unsigned)s.out_c);
  if (s.filter_n != s.out_c || s.filter_c != s.in_c / groups)
    return ops::Fail("filter dims [%u,%u,%u,%u]: expected [out_channels = %u, kh, kw, "
                     "in_channels/groups = %u]",
                     (unsigned)s.filter_n, (unsigned)s.k_h, (unsigned)s.k_w, (unsigned)s.filter_c,
                     (unsigned)s.out_c, (unsigned)(s.in_c / groups));
  return Status::Ok();
}

// Both axes of a CONV2D / DEPTHWISE_CONV2D window (P: their params struct,
// whose window fields have the same names).
template <typename P>
Status CheckConvWindow(const ConvShape& s, const P& p) {
  ESPNN_RETURN_IF_ERROR(CheckConvAxis("height", "stride_h", p.stride_h, "dilation_h", p.dilation_h,
                                      "pad_top", p.pad_top, s.in_h, s.k_h, s.out_h));
  return CheckConvAxis("width", "stride_w", p.stride_w, "dilation_w", p.dilation_w, "pad_left",
                       p.pad_left, s.in_w, s.k_w, s.out_w);
}

// The dilation of an axis with a single tap is irrelevant.
template <typename P>
bool Dilated(const ConvShape& s, const P& p) {
  return (s.k_h > 1 && p.dilation_h != 1) || (s.k_w > 1 && p.dilation_w != 1);
}

// The op's data at run time.
struct ConvData {
  const int8_t* input;
  const int8_t* filter;
  const int32_t* bias;  // null when absent
  // Non-const only because ESP-NN's quant_data_t is; nothing writes them.
  int32_t* mult;
  int32_t* shift;
  int8_t* output;
};

inline ConvData ReadConvData(const OpInfo& op, const EvalContext& ctx) {
  return {(const int8_t*)ctx.in(op.inputs[kInput]), (const int8_t*)ctx.in(op.inputs[kFilter]),
          (const int32_t*)ctx.in(op.inputs[kBias]), (int32_t*)ctx.in(op.inputs[kMult]),
          (int32_t*)ctx.in(op.inputs[kShift]),      (int8_t*)ctx.out(op.outputs[0])};
}

// The arguments of one ESP-NN conv or depthwise call on one image (EspnnParams:
// conv_params_t or dw_conv_params_t; a depthwise caller adds ch_mult). ESP-NN
// orders dims and pairs as {width, height}; its dilation field is ignored, so
// dilated layers never get here.
template <typename EspnnParams>
struct EspnnConvArgs {
  data_dims_t in_dims, filter_dims, out_dims;
  EspnnParams params;
};

template <typename EspnnParams, typename P>
EspnnConvArgs<EspnnParams> MakeEspnnConvArgs(const ConvShape& s, const P& p) {
  EspnnConvArgs<EspnnParams> a;
  a.in_dims = {(int32_t)s.in_w, (int32_t)s.in_h, (int32_t)s.in_c, 1};
  a.filter_dims = {(int32_t)s.k_w, (int32_t)s.k_h, (int32_t)s.filter_c, 0};
  a.out_dims = {(int32_t)s.out_w, (int32_t)s.out_h, (int32_t)s.out_c, 1};
  a.params.in_offset = p.input_offset;
  a.params.out_offset = p.output_offset;
  a.params.stride = {p.stride_w, p.stride_h};
  a.params.padding = {p.pad_left, p.pad_top};
  a.params.dilation = {1, 1};
  a.params.activation = {p.act_min, p.act_max};
  return a;
}

// ESP-NN's per-channel requantization arrays.
inline quant_data_t EspnnQuant(const ConvData& d) {
  quant_data_t q;
  q.shift = d.shift;
  q.mult = d.mult;
  return q;
}

// Calls fn(input, output, aligned) for each image of the batch (ESP-NN takes
// one per call). aligned: both pointers are 16-byte aligned, which ESP32-S3's
// optimized paths assume; arena tensors are, later images of a batch need
// not be, and the ANSI kernels do not care.
template <typename Fn>
void ForEachImage(const ConvShape& s, const ConvData& d, Fn fn) {
  const uint32_t in_image = s.in_h * s.in_w * s.in_c, out_image = s.out_h * s.out_w * s.out_c;
  for (uint32_t n = 0; n < s.batch; ++n) {
    const int8_t* in_n = d.input + n * in_image;
    int8_t* out_n = d.output + n * out_image;
    fn(in_n, out_n, (((uintptr_t)in_n | (uintptr_t)out_n) & 15u) == 0);
  }
}

// Wrap-around int32 addition (ESP-NN is built with two's-complement wrap).
inline int32_t WrapAdd(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }

inline int8_t Requantize(uint32_t acc, int32_t mult, int32_t shift, int32_t output_offset,
                         int32_t act_min, int32_t act_max) {
  const int32_t v = WrapAdd(ops::MBQM((int32_t)acc, mult, shift), output_offset);
  return (int8_t)ops::Clamp(v, act_min, act_max);
}

// Which input channels and filter taps output channel o reads: input
// channels [(o / outs_per_group) * group_in_c, +group_in_c), and filter
// element (o, ky, kx, i) at o*fs_o + ky*fs_y + kx*fs_x + i, which covers both
// the OHWI conv layout and the [1,kh,kw,C*M] depthwise layout.
struct FilterLayout {
  uint32_t group_in_c, outs_per_group;
  uint32_t fs_o, fs_y, fs_x;
};

// The interpreter's own int8 convolution, TFLite/ESP-NN arithmetic: per
// output element, acc = sum over in-image taps of (x + input_offset) * w
// (taps outside the image are skipped, i.e. padding with the input zero
// point) + bias, accumulated with int32 wrap-around like ESP-NN;
// y = clamp(MBQM(acc, mult[o], shift[o]) + output_offset, act_min, act_max).
// P is CONV2D_Params or DEPTHWISE_CONV2D_Params (same window and offset
// fields). validate() bounds every quantity so that all index arithmetic
// fits uint32 and every window coordinate fits int32.
template <typename P>
void DirectConv(const ConvData& d, const ConvShape& s, const FilterLayout& f, const P& p) {
  int8_t* out = d.output;
  for (uint32_t n = 0; n < s.batch; ++n) {
    const int8_t* image = d.input + (uint32_t)(n * s.in_h * s.in_w * s.in_c);
    for (uint32_t oy = 0; oy < s.out_h; ++oy) {
      const int32_t y0 = (int32_t)oy * p.stride_h - p.pad_top;
      for (uint32_t ox = 0; ox < s.out_w; ++ox) {
        const int32_t x0 = (int32_t)ox * p.stride_w - p.pad_left;
        for (uint32_t o = 0; o < s.out_c; ++o) {
          const uint32_t c0 = (o / f.outs_per_group) * f.group_in_c;
          uint32_t acc = d.bias != nullptr ? (uint32_t)d.bias[o] : 0u;
          for (uint32_t ky = 0; ky < s.k_h; ++ky) {
            const int32_t iy = y0 + (int32_t)ky * p.dilation_h;
            if (iy < 0 || iy >= (int32_t)s.in_h) continue;
            for (uint32_t kx = 0; kx < s.k_w; ++kx) {
              const int32_t ix = x0 + (int32_t)kx * p.dilation_w;
              if (ix < 0 || ix >= (int32_t)s.in_w) continue;
              const int8_t* px = image + ((uint32_t)iy * s.in_w + (uint32_t)ix) * s.in_c + c0;
              const int8_t* w = d.filter + o * f.fs_o + ky * f.fs_y + kx * f.fs_x;
              for (uint32_t i = 0; i < f.group_in_c; ++i)
                acc += (uint32_t)(((int32_t)px[i] + p.input_offset) * (int32_t)w[i]);
            }
          }
          *out++ = Requantize(acc, d.mult[o], d.shift[o], p.output_offset, p.act_min, p.act_max);
        }
      }
    }
  }
}

}  // namespace conv_util
}  // namespace espnn
