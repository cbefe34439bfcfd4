// MEAN_HW: mean over the spatial dims of an int8 NHWC tensor [N,H,W,C] ->
// [N,1,1,C] or [N,C], with requantization (ESP-NN's esp_nn_mean_nhwc_s8, one
// call per image). The lowering folds 1/(H*W) into mult/shift as TFLM's
// QuantizedMeanOrSum does; the zero points are passed raw.
#include "ops/espnn_api.h"
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

Status ValidateMean(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  const uint32_t batch = in.dims[0], ch = in.dims[3];
  const bool keepdims = out.rank == 4 && out.dims[0] == batch && out.dims[1] == 1 &&
                        out.dims[2] == 1 && out.dims[3] == ch;
  const bool flat = out.rank == 2 && out.dims[0] == batch && out.dims[1] == ch;
  if (!keepdims && !flat)
    return ops::Fail("output shape must be [%u,1,1,%u] or [%u,%u] for input [%u,%u,%u,%u]",
                     (unsigned)batch, (unsigned)ch, (unsigned)batch, (unsigned)ch,
                     (unsigned)batch, (unsigned)in.dims[1], (unsigned)in.dims[2], (unsigned)ch);
  // The kernel sums H*W int8 values minus H*W*input_zero_point in int32:
  // |sum| <= 255*H*W must fit.
  const uint64_t taps = (uint64_t)in.dims[1] * in.dims[2];
  const uint64_t max_abs = 255u * taps;
  if (max_abs > (uint64_t)INT32_MAX)
    return ops::Fail("H*W = %llu: 255*H*W overflows the int32 sum", (unsigned long long)taps);
  const auto p = op.Params<MEAN_HW_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input_zero_point, "input_zero_point", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_zero_point, "output_zero_point", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.mult, "mult", 0, INT32_MAX));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.shift, "shift", -31, 30));
  // A positive shift is applied to the sum before the multiply; it must not
  // wrap (TFLM's fold keeps it small: shift = s - floor(log2(H*W))).
  if (p.shift > 0 && (max_abs << p.shift) > (uint64_t)INT32_MAX)
    return ops::Fail("shift = %d: 255*H*W << shift overflows int32", (int)p.shift);
  return Status::Ok();
}

Status EvalMean(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<MEAN_HW_Params>();
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  const uint32_t h = in.dims[1], w = in.dims[2], ch = in.dims[3];
  const uint32_t image = h * w * ch;  // divides the tensor size, < 2^31
  for (uint32_t n = 0; n < in.dims[0]; ++n) {
    esp_nn_mean_nhwc_s8(src + n * image, dst + n * ch, (int32_t)h, (int32_t)w, (int32_t)ch,
                        p.input_zero_point, p.output_zero_point, p.mult, p.shift);
  }
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
ESPNN_S3_SCALAR_ROUTE(kMeanS3Rule, "esp_nn_mean_nhwc_s8 (C)",
                      "§5.1 mean: pure C (int16/int32 accumulation), no SIMD");
#endif

}  // namespace

extern const OpKernel kMeanHwKernel = {ValidateMean, nullptr, EvalMean ESPNN_S3_ROUTE(kMeanS3Rule)};

}  // namespace espnn
