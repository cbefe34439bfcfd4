// AVG_POOL2D and MAX_POOL2D on int8 NHWC tensors [N,H,W,C], one ESP-NN call
// per image. Pooling does not requantize: input and output must share scale
// and zero point. Windows are placed with top/left padding only; ESP-NN
// clips each window to the image, so the bottom/right padding is implicit in
// the output size.
#include "ops/espnn_api.h"
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

// Largest in-image window whose int32 sum of int8 values (|v| <= 128)
// cannot overflow: 128 * taps <= INT32_MAX.
constexpr uint32_t kMaxAvgTaps = 0x7FFFFFFFu / 128u;

// Checks one spatial axis. After this, every output position along the axis
// has a window with at least one in-image tap (ESP-NN divides by the tap
// count, so an empty window would divide by zero), and every value ESP-NN
// narrows to uint16 fits.
Status CheckAxis(const char* axis, uint32_t in, uint32_t out, int32_t kernel, const char* kname,
                 int32_t stride, const char* sname, int32_t pad, const char* pname) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(kernel, kname, 1, (int32_t)kMaxKernelDim));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(stride, sname, 1, (int32_t)kMaxKernelDim));
  if (pad < 0 || pad >= kernel)
    return ops::Fail("%s = %d must be in 0..%s-1 = %d (the first window would have no "
                     "in-image tap)",
                     pname, (int)pad, kname, (int)(kernel - 1));
  if (in > kMaxKernelDim)
    return ops::Fail("input %s %u exceeds ESP-NN's uint16 limit %u", axis, (unsigned)in,
                     (unsigned)kMaxKernelDim);
  if (out > kMaxKernelDim)
    return ops::Fail("output %s %u exceeds ESP-NN's uint16 limit %u", axis, (unsigned)out,
                     (unsigned)kMaxKernelDim);
  // All operands are < 2^17 here, so nothing below overflows uint32.
  const uint32_t k = (uint32_t)kernel, s = (uint32_t)stride, p = (uint32_t)pad;
  // The last window starts at (out-1)*s - p and must start inside the image.
  const uint32_t hi = (in - 1u + p) / s + 1u;
  if (out > hi)
    return ops::Fail("output %s %u > %u: window %u would start past the input's %u (no "
                     "in-image tap; %s %d, %s %d)",
                     axis, (unsigned)out, (unsigned)hi, (unsigned)(out - 1u), (unsigned)in,
                     sname, (int)stride, pname, (int)pad);
  // Fewer outputs than a zero bottom pad gives would silently drop input
  // rows/columns: the output size does not match the geometry.
  const uint32_t lo = in + p >= k ? (in + p - k) / s + 1u : 1u;
  if (out < lo)
    return ops::Fail("output %s %u < %u expected for input %s %u, %s %d, %s %d, %s %d", axis,
                     (unsigned)out, (unsigned)lo, axis, (unsigned)in, kname, (int)kernel,
                     sname, (int)stride, pname, (int)pad);
  return Status::Ok();
}

Status ValidatePool(const Model& m, const OpInfo& op, bool average) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 4));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 4));
  if (out.dims[0] != in.dims[0])
    return ops::Fail("output batch %u != input batch %u", (unsigned)out.dims[0],
                     (unsigned)in.dims[0]);
  if (out.dims[3] != in.dims[3])
    return ops::Fail("output channels %u != input channels %u", (unsigned)out.dims[3],
                     (unsigned)in.dims[3]);
  if (in.dims[3] > kMaxKernelDim)
    return ops::Fail("channels %u exceed ESP-NN's uint16 limit %u", (unsigned)in.dims[3],
                     (unsigned)kMaxKernelDim);
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameQuant(in, "input", out, "output"));
  const auto p = op.Params<AVG_POOL2D_Params>();
  ESPNN_RETURN_IF_ERROR(CheckAxis("height", in.dims[1], out.dims[1], p.kernel_h, "kernel_h",
                                  p.stride_h, "stride_h", p.pad_top, "pad_top"));
  ESPNN_RETURN_IF_ERROR(CheckAxis("width", in.dims[2], out.dims[2], p.kernel_w, "kernel_w",
                                  p.stride_w, "stride_w", p.pad_left, "pad_left"));
  if (average) {
    // A window never holds more taps than the image has along each axis.
    const uint32_t th = (uint32_t)p.kernel_h < in.dims[1] ? (uint32_t)p.kernel_h : in.dims[1];
    const uint32_t tw = (uint32_t)p.kernel_w < in.dims[2] ? (uint32_t)p.kernel_w : in.dims[2];
    if ((uint64_t)th * tw > kMaxAvgTaps)
      return ops::Fail("kernel_h x kernel_w: windows of %llu in-image taps overflow the int32 sum "
                       "(max %u)",
                       (unsigned long long)th * tw, (unsigned)kMaxAvgTaps);
  }
  return ops::ExpectActivationRange(p.act_min, p.act_max);
}

Status ValidateAvgPool(const Model& m, const OpInfo& op) { return ValidatePool(m, op, true); }
Status ValidateMaxPool(const Model& m, const OpInfo& op) { return ValidatePool(m, op, false); }

using PoolFn = void (*)(const int8_t*, uint16_t, uint16_t, int8_t*, uint16_t, uint16_t, uint16_t,
                        uint16_t, uint16_t, uint16_t, uint16_t, uint16_t, int32_t, int32_t,
                        uint16_t);

Status EvalPool(const OpInfo& op, const EvalContext& ctx, PoolFn fn) {
  const auto p = op.Params<AVG_POOL2D_Params>();
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  // validate() bounded every value below by kMaxKernelDim.
  const uint16_t in_h = (uint16_t)in.dims[1], in_w = (uint16_t)in.dims[2];
  const uint16_t out_h = (uint16_t)out.dims[1], out_w = (uint16_t)out.dims[2];
  const uint16_t ch = (uint16_t)in.dims[3];
  // Per-image sizes divide tensor sizes that fit in 2^31 - 1.
  const uint32_t in_image = (uint32_t)in_h * in_w * ch, out_image = (uint32_t)out_h * out_w * ch;
  for (uint32_t n = 0; n < in.dims[0]; ++n) {
    fn(src + n * in_image, in_w, in_h, dst + n * out_image, out_w, out_h, (uint16_t)p.stride_w,
       (uint16_t)p.stride_h, (uint16_t)p.kernel_w, (uint16_t)p.kernel_h, (uint16_t)p.pad_left,
       (uint16_t)p.pad_top, p.act_min, p.act_max, ch);
  }
  return Status::Ok();
}

// ESP32-S3's optimized pooling only handles channels % 4 == 0: max pool
// returns without writing anything otherwise, and avg pool falls back to an
// int16 accumulator that overflows on large windows. The ANSI functions are
// always linked, so route such channel counts there explicitly.
bool S3PoolSimd(const OpInfo& op, const EvalContext& ctx) { return ctx.tensor(op.inputs[0]).dims[3] % 4u == 0; }

Status EvalAvgPool(const OpInfo& op, const EvalContext& ctx) {
  return EvalPool(op, ctx, S3PoolSimd(op, ctx) ? PoolFn{esp_nn_avg_pool_s8} : PoolFn{esp_nn_avg_pool_s8_ansi});
}

Status EvalMaxPool(const OpInfo& op, const EvalContext& ctx) {
  return EvalPool(op, ctx, S3PoolSimd(op, ctx) ? PoolFn{esp_nn_max_pool_s8} : PoolFn{esp_nn_max_pool_s8_ansi});
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
// kernels: the S3 asm, then the ANSI function.
const char* const kAvgPoolS3Kernels[] = {"esp_nn_avg_pool_s8_esp32s3", "esp_nn_avg_pool_s8_ansi", nullptr};
const char* const kMaxPoolS3Kernels[] = {"esp_nn_max_pool_s8_esp32s3", "esp_nn_max_pool_s8_ansi", nullptr};

void DescribePool(const OpInfo& op, const EvalContext& ctx, const char* const* kernels, S3Route* r) {
  if (S3PoolSimd(op, ctx))
    SetS3Route(r, true, 1.0, kernels[0], "channels %% 4 == 0");
  else
    SetS3Route(r, false, 0.0, kernels[1], "channels %% 4 != 0 -> ANSI");
}

void DescribeAvgPool(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  DescribePool(op, ctx, kAvgPoolS3Kernels, r);
}
void DescribeMaxPool(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  DescribePool(op, ctx, kMaxPoolS3Kernels, r);
}

const S3RouteRule kAvgPoolS3Rule = {"§5.1 avg_pool: asm when channels % 4 == 0 [runtime: ANSI otherwise].",
                                    kAvgPoolS3Kernels, DescribeAvgPool};
const S3RouteRule kMaxPoolS3Rule = {"§5.1 max_pool: asm when channels % 4 == 0 [runtime: ANSI otherwise].",
                                    kMaxPoolS3Kernels, DescribeMaxPool};
#endif

}  // namespace

extern const OpKernel kAvgPool2dKernel = {ValidateAvgPool, nullptr, EvalAvgPool ESPNN_S3_ROUTE(kAvgPoolS3Rule)};
extern const OpKernel kMaxPool2dKernel = {ValidateMaxPool, nullptr, EvalMaxPool ESPNN_S3_ROUTE(kMaxPoolS3Rule)};

}  // namespace espnn
