// SOFTMAX over the last dimension of an int8 tensor (TFLite's int8 softmax;
// ESP-NN's esp_nn_softmax_s8). Every leading dimension is a row: height =
// product of the leading dims, width = the last dim. The output
// quantization is fixed by the algorithm at scale 1/256, zero point -128.
#include <math.h>

#include "ops/espnn_api.h"
#include "ops/op_util.h"

namespace espnn {
namespace {

using namespace xts3;

void RowsAndWidth(const TensorInfo& t, int32_t* height, int32_t* width) {
  // The parser guarantees num_elements() <= 2^31 - 1.
  *width = (int32_t)t.inner(0);
  *height = (int32_t)(t.num_elements() / t.inner(0));
}

Status ValidateSoftmax(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  // The kernel writes its result in units of 1/256 offset by -128; any other
  // output quantization would be read wrongly by the next op. The scale is
  // compared with a tolerance (as TFLite does) because it went through float.
  const float kOutScale = 1.0f / 256.0f;
  if (out.zero_point != -128 || fabsf(out.scale - kOutScale) > 1e-3f * kOutScale)
    return ops::Fail("output quantization (scale %g, zero point %d) must be scale 1/256, "
                     "zero point -128",
                     (double)out.scale, (int)out.zero_point);
  if (in.inner(0) > kMaxSoftmaxWidth)
    return ops::Fail("row length %u exceeds %u: the int8 softmax arithmetic is undefined there",
                     (unsigned)in.inner(0), (unsigned)kMaxSoftmaxWidth);
  const auto p = op.Params<SOFTMAX_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input_mult, "input_mult", 0, INT32_MAX));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input_left_shift, "input_left_shift", 0, 31));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.diff_min, "diff_min", INT32_MIN, 0));
  // Only differences d >= diff_min (and d >= -255 for int8) are scaled as
  // d * 2^input_left_shift; TFLite's diff_min is chosen so that product fits
  // int32. Enforce it so the kernel never relies on wrap-around.
  const uint32_t worst = p.diff_min < -255 ? 255u : (uint32_t)(-p.diff_min);
  if (((uint64_t)worst << p.input_left_shift) > (uint64_t)INT32_MAX)
    return ops::Fail("diff_min = %d with input_left_shift = %d overflows int32 (|diff| << shift)",
                     (int)p.diff_min, (int)p.input_left_shift);
  return Status::Ok();
}

// The optimized builds keep 4 bytes per element of one row in scratch (0 on
// ANSI). Size it from the real row length, the last dimension: TFLM passes
// dims[1]/dims[2] instead and under-sizes it for [1,1,1,N] inputs.
uint32_t SoftmaxScratch(const Model& m, const OpInfo& op) {
  int32_t height, width;
  RowsAndWidth(ops::InputTensor(m, op, 0), &height, &width);
  const int32_t bytes = esp_nn_get_softmax_scratch_size(width, height);
  return bytes > 0 ? (uint32_t)bytes : 0u;
}

// ESP-NN 1.2.3's S3 softmax finds a row's maximum with ee.vld.128.ip when
// the row has >= 32 elements; that load ignores the low 4 address bits, and
// rows are `width` bytes apart, so a row that does not start on a 16-byte
// boundary is read from the wrong bytes (part of the previous row) and its
// output is wrong. Seen under Espressif's QEMU with 49-, 65- and 197-wide
// rows (tests/idf/test_idf_qemu.py); aligned rows are exact.
constexpr int32_t kS3SoftmaxSimdWidth = 32;

bool S3SoftmaxRowAligned(const int8_t* row) { return ((uintptr_t)row & 15u) == 0; }

Status EvalSoftmax(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<SOFTMAX_Params>();
  int32_t height, width;
  RowsAndWidth(ctx.tensor(op.inputs[0]), &height, &width);
  const int8_t* in = (const int8_t*)ctx.in(op.inputs[0]);
  int8_t* out = (int8_t*)ctx.out(op.outputs[0]);
  // The scratch pointer is a process-wide global inside ESP-NN: register
  // ours immediately before the call (another op may have set another).
  esp_nn_set_softmax_scratch_buf(ctx.scratch);
  const bool rows_misalign = width % 16 != 0 || !S3SoftmaxRowAligned(in);
  if (!(kEspnnS3Optimized && width >= kS3SoftmaxSimdWidth && rows_misalign)) {
    esp_nn_softmax_s8(in, height, width, p.input_mult, p.input_left_shift, p.diff_min, out);
    return Status::Ok();
  }
  // Row by row: the S3 routine where the row is aligned, ANSI C elsewhere
  // (the same arithmetic, bit for bit).
  for (int32_t r = 0; r < height; ++r) {
    const int8_t* row = in + (size_t)r * (size_t)width;
    int8_t* orow = out + (size_t)r * (size_t)width;
    if (S3SoftmaxRowAligned(row))
      esp_nn_softmax_s8(row, 1, width, p.input_mult, p.input_left_shift, p.diff_min, orow);
    else
      esp_nn_softmax_s8_ansi(row, 1, width, p.input_mult, p.input_left_shift, p.diff_min, orow);
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kSoftmaxKernel = {ValidateSoftmax, SoftmaxScratch, EvalSoftmax};

}  // namespace espnn
