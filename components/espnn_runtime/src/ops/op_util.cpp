#include "ops/op_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

namespace espnn {
namespace ops {

using namespace xts3;

Status Fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Status s = Status::ErrorV(StatusCode::kInvalidBlob, fmt, ap);
  va_end(ap);
  return s;
}

TensorInfo InputTensor(const Model& m, const OpInfo& op, uint32_t slot) {
  return m.tensor(op.inputs[slot]);
}

TensorInfo OutputTensor(const Model& m, const OpInfo& op, uint32_t slot) {
  return m.tensor(op.outputs[slot]);
}

Status ExpectTensor(const TensorInfo& t, const char* what, DType dtype, uint32_t rank) {
  if (t.dtype != dtype)
    return Fail("%s has dtype %s, expected %s", what, DTypeName(t.dtype), DTypeName(dtype));
  if (rank != 0 && t.rank != rank)
    return Fail("%s has rank %u, expected %u", what, (unsigned)t.rank, (unsigned)rank);
  return Status::Ok();
}

Status ExpectConstVector(const TensorInfo& t, const char* what, DType dtype, uint32_t elements) {
  if (t.memory != Memory::CONSTANT) return Fail("%s must be a constant", what);
  if (t.dtype != dtype)
    return Fail("%s has dtype %s, expected %s", what, DTypeName(t.dtype), DTypeName(dtype));
  if (t.num_elements() != elements)
    return Fail("%s has %u elements, expected %u", what, (unsigned)t.num_elements(),
                (unsigned)elements);
  return Status::Ok();
}

Status ExpectSameShape(const TensorInfo& a, const char* what_a, const TensorInfo& b,
                       const char* what_b) {
  if (!a.same_shape(b)) return Fail("%s and %s have different shapes", what_a, what_b);
  return Status::Ok();
}

Status ExpectSameQuant(const TensorInfo& a, const char* what_a, const TensorInfo& b,
                       const char* what_b) {
  if (a.zero_point != b.zero_point || fabsf(a.scale - b.scale) > 1e-6f * fabsf(a.scale))
    return Fail("%s (scale %g, zero point %d) and %s (scale %g, zero point %d) must share "
                "quantization",
                what_a, (double)a.scale, (int)a.zero_point, what_b, (double)b.scale,
                (int)b.zero_point);
  return Status::Ok();
}

Status ExpectRange(int32_t value, const char* what, int32_t lo, int32_t hi) {
  if (value < lo || value > hi)
    return Fail("%s = %d is not in %d..%d", what, (int)value, (int)lo, (int)hi);
  return Status::Ok();
}

Status ExpectActivationRange(int32_t act_min, int32_t act_max) {
  ESPNN_RETURN_IF_ERROR(ExpectRange(act_min, "act_min", -128, 127));
  ESPNN_RETURN_IF_ERROR(ExpectRange(act_max, "act_max", -128, 127));
  if (act_min > act_max) return Fail("act_min %d > act_max %d", (int)act_min, (int)act_max);
  return Status::Ok();
}

Status CheckAccumulatorRows(const int8_t* w, const uint8_t* bias, const uint8_t* shift,
                            uint32_t rows, uint64_t taps, uint64_t row_stride,
                            uint64_t tap_stride, int32_t input_offset, const char* what) {
  const int64_t x_lo = -128 + (int64_t)input_offset, x_hi = 127 + (int64_t)input_offset;
  const int64_t max_x = x_hi > -x_lo ? x_hi : -x_lo;
  for (uint32_t r = 0; r < rows; ++r) {
    int64_t wsum = 0;  // taps <= the weights' element count, each |w| <= 128
    for (uint64_t t = 0; t < taps; ++t) {
      const int64_t v = w[r * row_stride + t * tap_stride];
      wsum += v < 0 ? -v : v;
    }
    int64_t bound = wsum * max_x;
    if (bias != nullptr) {
      const int64_t b = LoadI32(bias, r);
      bound += b < 0 ? -b : b;
    }
    const int32_t s = LoadI32(shift, r);
    const int64_t limit = s > 0 ? (int64_t)(INT32_MAX >> s) : (int64_t)INT32_MAX;
    if (bound > limit)
      return Fail("%s %u: |bias| + sum|w| * %d, shifted left by %d, can exceed int32", what,
                  (unsigned)r, (int)max_x, (int)(s > 0 ? s : 0));
  }
  return Status::Ok();
}


}  // namespace ops
}  // namespace espnn
