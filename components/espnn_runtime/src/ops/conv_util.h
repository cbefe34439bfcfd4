// Shared pieces of the convolution family (conv.cpp, depthwise_conv.cpp,
// transpose_conv.cpp): validation of the window geometry and of the
// requantization constants, and the interpreter's own direct convolution
// for what ESP-NN cannot compute (dilation; windows beyond ESP-NN's int16
// origin arithmetic).
//
// Input slots shared by all three ops (xts3_format.h):
//   0 input  int8 [N,H,W,Cin] (NHWC)      1 filter int8, constant
//   2 bias   int32 [Cout], constant or absent   3 mult int32 [Cout], constant
//   4 shift  int32 [Cout], constant (signed exponent, positive = left)
#pragma once

#include <stdint.h>
#include <string.h>

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

// Offsets and activation clamp (ESP-NN convention: input_offset = -zp, so
// [-127, 128]; output_offset = +zp).
inline Status CheckOffsets(int32_t input_offset, int32_t output_offset, int32_t act_min,
                           int32_t act_max) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(input_offset, "input_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(output_offset, "output_offset", -128, 127));
  return ops::ExpectActivationRange(act_min, act_max);
}

inline int32_t ConstWord(const uint8_t* p, uint32_t i) {
  int32_t v;
  memcpy(&v, p + 4u * i, 4);
  return v;
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
    const int32_t mv = ConstWord(mp, c), sv = ConstWord(sp, c);
    if (mv < 0) return ops::Fail("mult[%u] = %d is negative", (unsigned)c, (int)mv);
    if (sv < -31 || sv > 30)
      return ops::Fail("shift[%u] = %d is not in -31..30", (unsigned)c, (int)sv);
  }
  return Status::Ok();
}

// Filter: an int8 constant of rank 4 with symmetric quantization (ESP-NN has
// no filter offset).
inline Status CheckFilterTensor(const TensorInfo& f) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(f, "filter", xts3::DType::INT8, 4));
  if (f.memory != xts3::Memory::CONSTANT) return ops::Fail("filter must be a constant");
  if (f.zero_point != 0)
    return ops::Fail("filter zero point %d: weights must be symmetric (0)", (int)f.zero_point);
  return Status::Ok();
}

// These ops read their input while writing their output, so the two must
// not share arena bytes.
inline Status CheckNotInPlace(const TensorInfo& in, const TensorInfo& out) {
  if (in.memory != xts3::Memory::ARENA) return Status::Ok();
  const uint64_t a0 = in.offset, a1 = a0 + in.nbytes, b0 = out.offset, b1 = b0 + out.nbytes;
  if (a0 < b1 && b0 < a1)
    return ops::Fail("input and output overlap in the arena (the op cannot run in place)");
  return Status::Ok();
}

// The interpreter's own int8 convolution, TFLite/ESP-NN arithmetic: per
// output element, acc = sum over in-image taps of (x + input_offset) * w
// (taps outside the image are skipped, i.e. padding with the input zero
// point) + bias, accumulated with int32 wrap-around like ESP-NN;
// y = clamp(MBQM(acc, mult[o], shift[o]) + output_offset, act_min, act_max).
// Grouping: output channel o reads input channels
// [(o / outs_per_group) * group_in_c, +group_in_c). The filter element
// (o, ky, kx, i) lives at o*fs_o + ky*fs_y + kx*fs_x + i, which covers both
// the OHWI conv layout and the [1,kh,kw,C*M] depthwise layout.
// validate() bounds every quantity so that all index arithmetic fits uint32
// and every window coordinate fits int32.
struct DirectConvArgs {
  const int8_t* input;
  const int8_t* filter;
  const int32_t* bias;  // may be null
  const int32_t* mult;
  const int32_t* shift;
  int8_t* output;
  uint32_t batch, in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w;
  uint32_t group_in_c, outs_per_group;
  uint32_t fs_o, fs_y, fs_x;
  int32_t stride_h, stride_w, pad_top, pad_left, dil_h, dil_w;
  int32_t input_offset, output_offset, act_min, act_max;
};

// Wrap-around int32 addition (ESP-NN is built with two's-complement wrap).
inline int32_t WrapAdd(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }

inline int8_t Requantize(uint32_t acc, int32_t mult, int32_t shift, int32_t output_offset,
                         int32_t act_min, int32_t act_max) {
  const int32_t v = WrapAdd(ops::MBQM((int32_t)acc, mult, shift), output_offset);
  return (int8_t)ops::Clamp(v, act_min, act_max);
}

inline void DirectConv(const DirectConvArgs& a) {
  int8_t* out = a.output;
  for (uint32_t n = 0; n < a.batch; ++n) {
    const int8_t* image = a.input + (uint32_t)(n * a.in_h * a.in_w * a.in_c);
    for (uint32_t oy = 0; oy < a.out_h; ++oy) {
      const int32_t y0 = (int32_t)oy * a.stride_h - a.pad_top;
      for (uint32_t ox = 0; ox < a.out_w; ++ox) {
        const int32_t x0 = (int32_t)ox * a.stride_w - a.pad_left;
        for (uint32_t o = 0; o < a.out_c; ++o) {
          const uint32_t c0 = (o / a.outs_per_group) * a.group_in_c;
          uint32_t acc = a.bias != nullptr ? (uint32_t)a.bias[o] : 0u;
          for (uint32_t ky = 0; ky < a.k_h; ++ky) {
            const int32_t iy = y0 + (int32_t)ky * a.dil_h;
            if (iy < 0 || iy >= (int32_t)a.in_h) continue;
            for (uint32_t kx = 0; kx < a.k_w; ++kx) {
              const int32_t ix = x0 + (int32_t)kx * a.dil_w;
              if (ix < 0 || ix >= (int32_t)a.in_w) continue;
              const int8_t* px = image + ((uint32_t)iy * a.in_w + (uint32_t)ix) * a.in_c + c0;
              const int8_t* w = a.filter + o * a.fs_o + ky * a.fs_y + kx * a.fs_x;
              for (uint32_t i = 0; i < a.group_in_c; ++i)
                acc += (uint32_t)(((int32_t)px[i] + a.input_offset) * (int32_t)w[i]);
            }
          }
          *out++ = Requantize(acc, a.mult[o], a.shift[o], a.output_offset, a.act_min, a.act_max);
        }
      }
    }
  }
}

}  // namespace conv_util
}  // namespace espnn
