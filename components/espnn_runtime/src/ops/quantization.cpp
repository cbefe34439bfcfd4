// QUANTIZE (float32 -> int8), DEQUANTIZE (int8 -> float32) at graph
// boundaries, and REQUANTIZE (int8 -> int8 with new quantization
// parameters). ESP-NN has no kernels for these; they run in the interpreter.
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

Status ValidateQuantize(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::FLOAT32, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  const auto p = op.Params<QUANTIZE_Params>();
  const float inv_scale = FloatFromBits(p.inv_scale_f32);
  if (!(inv_scale > 0.0f) || isinf(inv_scale))
    return ops::Fail("inv_scale_f32 must be a finite positive float");
  return ops::ExpectRange(p.zero_point, "zero_point", -128, 127);
}

// q = clamp(nearbyint(x * inv_scale) + zero_point), the formula of PyTorch's
// quantize_per_tensor and ExecuTorch's portable kernel (ties to even under
// the default rounding mode). NaN maps to the zero point.
Status EvalQuantize(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<QUANTIZE_Params>();
  const float inv_scale = FloatFromBits(p.inv_scale_f32);
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const uint8_t* src = ctx.in(op.inputs[0]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  const uint32_t n = in.num_elements();
  for (uint32_t i = 0; i < n; ++i) {
    float x;
    memcpy(&x, src + 4u * i, 4);  // graph inputs may come from unaligned host memory
    float r = nearbyintf(x * inv_scale);
    int32_t q;
    if (!(r == r)) {
      q = p.zero_point;
    } else {
      // Clamp in float first so the conversion to int cannot overflow.
      r = r < -1000.0f ? -1000.0f : (r > 1000.0f ? 1000.0f : r);
      q = ops::Clamp((int32_t)r + p.zero_point, -128, 127);
    }
    dst[i] = (int8_t)q;
  }
  return Status::Ok();
}

Status ValidateDequantize(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::FLOAT32, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  const auto p = op.Params<DEQUANTIZE_Params>();
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
