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

// channels_last = 1: the output's dims are the input's with dim 1 moved last.
Status ExpectChannelsLastShape(const TensorInfo& in, const TensorInfo& out) {
  if (in.rank < 3)
    return ops::Fail("channels_last needs an input of rank 3..5 ([N, C, spatial...]), not rank %u",
                     (unsigned)in.rank);
  bool ok = out.rank == in.rank && out.dims[0] == in.dims[0] && out.dims[in.rank - 1] == in.dims[1];
  for (uint32_t d = 2; ok && d < in.rank; ++d) ok = out.dims[d - 1] == in.dims[d];
  if (!ok)
    return ops::Fail("channels_last: the output's dims must be the input's with dim 1 moved last");
  return Status::Ok();
}

Status ValidateQuantize(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::FLOAT32, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  const auto p = op.Params<QUANTIZE_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.channels_last, "channels_last", 0, 1));
  ESPNN_RETURN_IF_ERROR(p.channels_last ? ExpectChannelsLastShape(in, out)
                                        : ops::ExpectSameShape(in, "input", out, "output"));
  const float inv_scale = FloatFromBits(p.inv_scale_f32);
  if (!(inv_scale > 0.0f) || isinf(inv_scale))
    return ops::Fail("inv_scale_f32 must be a finite positive float");
  return ops::ExpectRange(p.zero_point, "zero_point", -128, 127);
}

// The input element output element i reads, stepped once per output element
// (no division per element). The output is read as [N, S, C] from an input
// [N, C, S]: channels_last's order with S the spatial dims' product, or, for
// an output in the input's order, C = 1 and S = all elements.
struct SourceWalk {
  SourceWalk(uint32_t num_channels, uint32_t num_spatial) : channels(num_channels), spatial(num_spatial) {}

  uint32_t channels, spatial;
  uint32_t index = 0, c = 0, s = 0;  // the input element of the current output element (n, s, c)

  void Advance() {
    if (++c < channels) {
      index += spatial;  // the next channel of the same pixel
      return;
    }
    c = 0;
    if (++s < spatial) {
      index = index - (channels - 1) * spatial + 1;  // channel 0 of the next pixel
      return;
    }
    s = 0;
    index += 1;  // the next batch starts right after the last channel's last pixel
  }
};

SourceWalk WalkFor(const TensorInfo& in, bool channels_last) {
  if (!channels_last) return SourceWalk(1, in.num_elements());
  uint32_t spatial = 1;
  for (uint32_t d = 2; d < in.rank; ++d) spatial *= in.dims[d];
  return SourceWalk(in.dims[1], spatial);
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
  SourceWalk from = WalkFor(in, p.channels_last != 0);
  for (uint32_t i = 0; i < n; ++i, from.Advance()) {
    float x;
    memcpy(&x, src + 4u * from.index, 4);  // graph inputs may come from unaligned host memory
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
