// SOFTMAX over the last dimension of an int8 tensor (TFLite's int8 softmax;
// ESP-NN's esp_nn_softmax_s8). Every leading dimension is a row: height =
// product of the leading dims, width = the last dim. The output
// quantization is fixed by the algorithm at scale 1/256, zero point -128.
//
// MASKED_SOFTMAX: the same softmax over the positions a constant 0/1 mask
// allows (attention with is_causal or a constant mask): PyTorch adds -inf
// at the masked positions, so they get probability 0 and the others are the
// softmax of the allowed values alone. Each row's allowed values are
// gathered into scratch, ESP-NN's softmax runs on that shorter row, and the
// results are scattered back; masked positions are -128 (probability 0), and
// a fully masked row is all -128, as PyTorch's scaled_dot_product_attention
// gives (its "safe softmax" returns 0 there, not NaN).
#include <math.h>

#include "ops/espnn_api.h"
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

void RowsAndWidth(const TensorInfo& t, int32_t* height, int32_t* width) {
  // The parser guarantees num_elements() <= 2^31 - 1.
  *width = (int32_t)t.inner(0);
  *height = (int32_t)(t.num_elements() / t.inner(0));
}

Status ValidateSoftmaxCore(const Model& m, const OpInfo& op, const SOFTMAX_Params& p) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  // The kernel writes its result in units of 1/256 offset by -128; any other
  // output quantization would be read wrongly by the next op. The scale is
  // compared with a tolerance (as TFLite does) because it went through float.
  if (out.zero_point != kSoftmaxOutZeroPoint ||
      fabsf(out.scale - kSoftmaxOutScale) > 1e-3f * kSoftmaxOutScale)
    return ops::Fail("output quantization (scale %g, zero point %d) must be scale 1/256, "
                     "zero point -128",
                     (double)out.scale, (int)out.zero_point);
  if (in.inner(0) > kMaxSoftmaxWidth)
    return ops::Fail("row length %u exceeds %u: the int8 softmax arithmetic is undefined there",
                     (unsigned)in.inner(0), (unsigned)kMaxSoftmaxWidth);
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

Status ValidateSoftmax(const Model& m, const OpInfo& op) {
  return ValidateSoftmaxCore(m, op, op.Params<SOFTMAX_Params>());
}

// The two parameter lists are the same fields (xts3_format.h).
SOFTMAX_Params AsSoftmax(const MASKED_SOFTMAX_Params& p) {
  return {p.input_mult, p.input_left_shift, p.diff_min};
}

Status ValidateMaskedSoftmax(const Model& m, const OpInfo& op) {
  ESPNN_RETURN_IF_ERROR(ValidateSoftmaxCore(m, op, AsSoftmax(op.Params<MASKED_SOFTMAX_Params>())));
  const TensorInfo in = ops::InputTensor(m, op, 0), mask = ops::InputTensor(m, op, 1);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(mask, "mask", DType::INT8, 2));
  if (mask.memory != Memory::CONSTANT) return ops::Fail("mask must be a constant");
  int32_t height, width;
  RowsAndWidth(in, &height, &width);
  if (mask.dims[1] != (uint32_t)width || mask.dims[0] == 0 || (uint32_t)height % mask.dims[0] != 0)
    return ops::Fail("mask is [%u, %u]; it needs [rows, %d] with rows dividing the input's %d rows",
                     (unsigned)mask.dims[0], (unsigned)mask.dims[1], (int)width, (int)height);
  const int8_t* bits = (const int8_t*)m.constant_data(mask);
  for (uint32_t i = 0; i < mask.dims[0] * mask.dims[1]; ++i)
    if (bits[i] != 0 && bits[i] != 1)
      return ops::Fail("mask element %u is %d; a mask holds 0 (masked) or 1 (attended)", (unsigned)i,
                       (int)bits[i]);
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

// One row the S3 routine would read from the wrong bytes.
bool S3SoftmaxRowToAnsi(const int8_t* row, int32_t width) {
  return width >= kS3SoftmaxSimdWidth && !S3SoftmaxRowAligned(row);
}

// Rows `width` bytes apart from `in` of which some may be such a row.
bool S3SoftmaxRowsMisaligned(const int8_t* in, int32_t width) {
  return width >= kS3SoftmaxSimdWidth && (width % 16 != 0 || !S3SoftmaxRowAligned(in));
}

// One row through ESP-NN, routed around the S3 defect below.
void SoftmaxRow(const int8_t* row, int32_t width, const SOFTMAX_Params& p, int8_t* out) {
  if (kEspnnS3Optimized && S3SoftmaxRowToAnsi(row, width))
    esp_nn_softmax_s8_ansi(row, 1, width, p.input_mult, p.input_left_shift, p.diff_min, out);
  else
    esp_nn_softmax_s8(row, 1, width, p.input_mult, p.input_left_shift, p.diff_min, out);
}

Status EvalSoftmax(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<SOFTMAX_Params>();
  int32_t height, width;
  RowsAndWidth(ctx.tensor(op.inputs[0]), &height, &width);
  const int8_t* in = (const int8_t*)ctx.in(op.inputs[0]);
  int8_t* out = (int8_t*)ctx.out(op.outputs[0]);
  // The scratch pointer is a process-wide global inside ESP-NN: register
  // ours immediately before the call (another op may have set another).
  esp_nn_set_softmax_scratch_buf(ctx.scratch);
  if (!(kEspnnS3Optimized && S3SoftmaxRowsMisaligned(in, width))) {
    esp_nn_softmax_s8(in, height, width, p.input_mult, p.input_left_shift, p.diff_min, out);
    return Status::Ok();
  }
  // Row by row: the S3 routine where the row is aligned, ANSI C elsewhere
  // (the same arithmetic, bit for bit).
  for (int32_t r = 0; r < height; ++r)
    SoftmaxRow(in + (size_t)r * (size_t)width, width, p, out + (size_t)r * (size_t)width);
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
// Rows that take ANSI count as the whole op off the SIMD path (as a row
// maximum is most of what the S3 routine vectorizes).
void DescribeSoftmax(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  int32_t height, width;
  RowsAndWidth(ctx.tensor(op.inputs[0]), &height, &width);
  if (width < kS3SoftmaxSimdWidth)
    SetS3Route(r, false, 0.0, "esp_nn_softmax_s8_esp32s3 (C)", "width < %d: scalar row max, C exp",
               (int)kS3SoftmaxSimdWidth);
  else if (S3SoftmaxRowsMisaligned((const int8_t*)ctx.in(op.inputs[0]), width))
    SetS3Route(r, false, 0.0, "esp_nn_softmax_s8_ansi (misaligned rows)",
               "width %% 16 != 0: rows not 16-byte aligned -> ANSI (ee.vld.128 ignores the low address bits)");
  else
    SetS3Route(r, true, 1.0, "esp_nn_softmax_s8_esp32s3", "width >= %d, aligned rows: SIMD row max, C exp",
               (int)kS3SoftmaxSimdWidth);
}

const char* const kSoftmaxS3Kernels[] = {"esp_nn_softmax_s8_esp32s3 (C)", "esp_nn_softmax_s8_ansi (misaligned rows)",
                                         "esp_nn_softmax_s8_esp32s3", nullptr};
const S3RouteRule kSoftmaxS3Rule = {
    "§5.1 softmax. ESP-NN 1.2.3's S3 softmax: the row maximum with ee.vmax.s8 (16 lanes) when the row has >= 32 "
    "elements, exp and normalisation in C. Its 128-bit loads ignore the low address bits, so [runtime] rows that "
    "do not start 16-byte aligned go to ANSI; with a 16-aligned arena that is every row but those at multiples "
    "of 16 when width % 16 != 0. Measured under QEMU: 0.57 of the ANSI instructions for 8x64 rows.",
    kSoftmaxS3Kernels, DescribeSoftmax};
#endif

// Scratch of MASKED_SOFTMAX: ESP-NN's softmax scratch for one row, then the
// gathered row and its result, each on a 16-byte boundary (the S3 routine
// reads 16 bytes at a time from 16-byte aligned rows).
uint32_t Align16(uint32_t n) { return (n + 15u) & ~15u; }

uint32_t MaskedSoftmaxScratch(const Model& m, const OpInfo& op) {
  int32_t height, width;
  RowsAndWidth(ops::InputTensor(m, op, 0), &height, &width);
  const int32_t espnn = esp_nn_get_softmax_scratch_size(width, 1);
  return Align16(espnn > 0 ? (uint32_t)espnn : 0u) + 2u * Align16((uint32_t)width);
}

Status EvalMaskedSoftmax(const OpInfo& op, const EvalContext& ctx) {
  const SOFTMAX_Params p = AsSoftmax(op.Params<MASKED_SOFTMAX_Params>());
  int32_t height, width;
  RowsAndWidth(ctx.tensor(op.inputs[0]), &height, &width);
  const TensorInfo mask_info = ctx.tensor(op.inputs[1]);
  const int8_t* in = (const int8_t*)ctx.in(op.inputs[0]);
  const int8_t* mask = (const int8_t*)ctx.in(op.inputs[1]);
  int8_t* out = (int8_t*)ctx.out(op.outputs[0]);
  const int32_t espnn = esp_nn_get_softmax_scratch_size(width, 1);
  int8_t* gathered = (int8_t*)ctx.scratch + Align16(espnn > 0 ? (uint32_t)espnn : 0u);
  int8_t* result = gathered + Align16((uint32_t)width);
  esp_nn_set_softmax_scratch_buf(ctx.scratch);
  const uint32_t mask_rows = mask_info.dims[0];
  for (int32_t r = 0; r < height; ++r) {
    const int8_t* row = in + (size_t)r * (size_t)width;
    const int8_t* allow = mask + (size_t)((uint32_t)r % mask_rows) * (size_t)width;
    int8_t* orow = out + (size_t)r * (size_t)width;
    int32_t n = 0;
    for (int32_t i = 0; i < width; ++i)
      if (allow[i]) gathered[n++] = row[i];
    if (n > 0) SoftmaxRow(gathered, n, p, result);
    // Scatter: the k-th allowed position gets the k-th result, the rest -128
    // (probability 0).
    for (int32_t i = 0, k = 0; i < width; ++i) orow[i] = allow[i] ? result[k++] : (int8_t)-128;
  }
  return Status::Ok();
}

}  // namespace

extern const OpKernel kSoftmaxKernel = {ValidateSoftmax, SoftmaxScratch, EvalSoftmax ESPNN_S3_ROUTE(kSoftmaxS3Rule)};
extern const OpKernel kMaskedSoftmaxKernel = {ValidateMaskedSoftmax, MaskedSoftmaxScratch, EvalMaskedSoftmax};

}  // namespace espnn
