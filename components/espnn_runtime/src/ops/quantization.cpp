// QUANTIZE (float32 -> int8), DEQUANTIZE (int8 -> float32) at graph
// boundaries, and REQUANTIZE (int8 -> int8 with new quantization
// parameters). ESP-NN has no kernels for these; they run in the interpreter.
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/op_util.h"

namespace espnn {
namespace {

using namespace xts3;

float FloatFromBits(int32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// channels_last = 1: `nhwc`'s dims are `nchw`'s with dim 1 moved last
// (QUANTIZE: input nchw, output nhwc; DEQUANTIZE the other way round).
Status ExpectChannelsLastShape(const TensorInfo& nchw, const TensorInfo& nhwc, const char* nchw_name,
                               const char* nhwc_name) {
  if (nchw.rank < 3)
    return ops::Fail("channels_last needs an %s of rank 3..5 ([N, C, spatial...]), not rank %u",
                     nchw_name, (unsigned)nchw.rank);
  bool ok = nhwc.rank == nchw.rank && nhwc.dims[0] == nchw.dims[0] &&
            nhwc.dims[nchw.rank - 1] == nchw.dims[1];
  for (uint32_t d = 2; ok && d < nchw.rank; ++d) ok = nhwc.dims[d - 1] == nchw.dims[d];
  if (!ok)
    return ops::Fail("channels_last: the %s's dims must be the %s's with dim 1 moved last", nhwc_name,
                     nchw_name);
  return Status::Ok();
}

Status ValidateQuantize(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::FLOAT32, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  const auto p = op.Params<QUANTIZE_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.channels_last, "channels_last", 0, 1));
  ESPNN_RETURN_IF_ERROR(p.channels_last ? ExpectChannelsLastShape(in, out, "input", "output")
                                        : ops::ExpectSameShape(in, "input", out, "output"));
  const float inv_scale = FloatFromBits(p.inv_scale_f32);
  if (!(inv_scale > 0.0f) || isinf(inv_scale))
    return ops::Fail("inv_scale_f32 must be a finite positive float");
  return ops::ExpectRange(p.zero_point, "zero_point", -128, 127);
}

// nearbyintf(y) for |y| <= 1000, in the current rounding mode. newlib's
// nearbyintf/rintf are bit-manipulating library calls (about 80 guest
// instructions per value on the ESP32-S3, most of a 96x96 input's QUANTIZE);
// adding and subtracting 1.5 * 2^23 rounds in the FPU instead: the sum lies
// in [2^23, 2^24), where the float spacing is 1, so the addition rounds y to
// an integer by the current mode and the subtraction is exact. That needs
// float arithmetic evaluated in float (FLT_EVAL_METHOD 0: the ESP32 FPUs,
// x86-64, and the -m32 build's SSE math); elsewhere the library call stays.
inline float RoundSmall(float y) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
  const float kShift = 12582912.0f;  // 1.5 * 2^23
  return (y + kShift) - kShift;
#else
  return nearbyintf(y);
#endif
}

// q = clamp(nearbyint(x * inv_scale) + zero_point), the formula of PyTorch's
// quantize_per_tensor and ExecuTorch's portable kernel (ties to even under
// the default rounding mode). NaN maps to the zero point.
inline int8_t QuantizeOne(float x, float inv_scale, int32_t zero_point) {
  float y = x * inv_scale;
  if (!(y == y)) return (int8_t)zero_point;
  // Clamp in float first so the conversion to int cannot overflow and
  // RoundSmall's range holds; clamping before rounding gives the same
  // result as after, since +-1000 are integers.
  y = y < -1000.0f ? -1000.0f : (y > 1000.0f ? 1000.0f : y);
  return (int8_t)ops::Clamp((int32_t)RoundSmall(y) + zero_point, -128, 127);
}

// channels_last: the output [N, S, C] (S = the spatial dims' product) from
// the input [N, C, S], written in order; the input is read with the stride S
// between channels. kWordAligned: src is float-aligned, so word loads.
template <bool kWordAligned>
void QuantizeChannelsLast(const TensorInfo& in, const uint8_t* src, int8_t* dst, float inv_scale,
                          int32_t zero_point) {
  uint32_t spatial = 1;
  for (uint32_t d = 2; d < in.rank; ++d) spatial *= in.dims[d];
  const uint32_t channels = in.dims[1];
  for (uint32_t b = 0; b < in.dims[0]; ++b, src += 4u * channels * spatial) {
    for (uint32_t s = 0; s < spatial; ++s) {
      for (uint32_t c = 0; c < channels; ++c) {
        const uint8_t* at = src + 4u * (c * spatial + s);
        float x;
        if constexpr (kWordAligned)
          x = *(const float*)(const void*)at;
        else
          memcpy(&x, at, 4);  // graph inputs may come from unaligned host memory
        *dst++ = QuantizeOne(x, inv_scale, zero_point);
      }
    }
  }
}

Status EvalQuantize(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<QUANTIZE_Params>();
  const float inv_scale = FloatFromBits(p.inv_scale_f32);
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const uint8_t* src = ctx.in(op.inputs[0]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  const uint32_t n = in.num_elements();
  if (p.channels_last) {
    if ((uintptr_t)src % alignof(float) == 0)
      QuantizeChannelsLast<true>(in, src, dst, inv_scale, p.zero_point);
    else
      QuantizeChannelsLast<false>(in, src, dst, inv_scale, p.zero_point);
    return Status::Ok();
  }
  if ((uintptr_t)src % alignof(float) == 0) {
    // The usual case: word loads (the ESP32's cores have no unaligned ones,
    // so the copy below costs a byte-wise load per value).
    const float* x = (const float*)(const void*)src;
    for (uint32_t i = 0; i < n; ++i) dst[i] = QuantizeOne(x[i], inv_scale, p.zero_point);
    return Status::Ok();
  }
  for (uint32_t i = 0; i < n; ++i) {
    float x;
    memcpy(&x, src + 4u * i, 4);  // graph inputs may come from unaligned host memory
    dst[i] = QuantizeOne(x, inv_scale, p.zero_point);
  }
  return Status::Ok();
}

Status ValidateDequantize(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::FLOAT32, 0));
  const auto p = op.Params<DEQUANTIZE_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.channels_last, "channels_last", 0, 1));
  ESPNN_RETURN_IF_ERROR(p.channels_last ? ExpectChannelsLastShape(out, in, "output", "input")
                                        : ops::ExpectSameShape(in, "input", out, "output"));
  const float scale = FloatFromBits(p.scale_f32);
  if (!(scale > 0.0f) || isinf(scale)) return ops::Fail("scale_f32 must be a finite positive float");
  return ops::ExpectRange(p.zero_point, "zero_point", -128, 127);
}

// x = (q - zero_point) * scale in float32, as PyTorch's dequantize_per_tensor.
Status EvalDequantize(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<DEQUANTIZE_Params>();
  const float scale = FloatFromBits(p.scale_f32);
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  uint8_t* dst = ctx.out(op.outputs[0]);
  const uint32_t n = in.num_elements();
  if (p.channels_last) {
    // The input [N, S, C] (S = the spatial dims' product) read in order, the
    // output [N, C, S] written with the stride S between channels.
    const uint32_t channels = in.dims[in.rank - 1];
    uint32_t spatial = 1;
    for (uint32_t d = 1; d + 1 < in.rank; ++d) spatial *= in.dims[d];
    for (uint32_t b = 0; b < in.dims[0]; ++b, dst += 4u * channels * spatial) {
      for (uint32_t s = 0; s < spatial; ++s) {
        for (uint32_t c = 0; c < channels; ++c) {
          float x = (float)((int32_t)*src++ - p.zero_point) * scale;
          memcpy(dst + 4u * (c * spatial + s), &x, 4);
        }
      }
    }
    return Status::Ok();
  }
  for (uint32_t i = 0; i < n; ++i) {
    float x = (float)((int32_t)src[i] - p.zero_point) * scale;
    memcpy(dst + 4u * i, &x, 4);
  }
  return Status::Ok();
}

Status ValidateRequantize(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  const auto p = op.Params<REQUANTIZE_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input_zero_point, "input_zero_point", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_zero_point, "output_zero_point", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.mult, "mult", 0, INT32_MAX));
  // |x - zp| <= 255 < 2^8, so a left shift up to 22 cannot wrap.
  return ops::ExpectRange(p.shift, "shift", -31, 22);
}

// In place (ESPNN_XTS3_ALIASING): dst[i] is written after src[i] is read.
Status EvalRequantize(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<REQUANTIZE_Params>();
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  const uint32_t n = in.num_elements();
  for (uint32_t i = 0; i < n; ++i) {
    int32_t v = ops::MBQM((int32_t)src[i] - p.input_zero_point, p.mult, p.shift);
    dst[i] = (int8_t)ops::Clamp(v + p.output_zero_point, -128, 127);
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kQuantizeKernel = {ValidateQuantize, nullptr, EvalQuantize};
extern const OpKernel kDequantizeKernel = {ValidateDequantize, nullptr, EvalDequantize};
extern const OpKernel kRequantizeKernel = {ValidateRequantize, nullptr, EvalRequantize};

}  // namespace espnn
