// Helpers shared by the op families: tensor checks for `validate` (each
// returns a Status whose message names the slot) and the TFLite integer
// arithmetic the interpreter's own kernels need.
#pragma once

#include <stdint.h>
#include <string.h>

#include "espnn/model.h"
#include "espnn/status.h"
#include "ops/op_kernel.h"

namespace espnn {
namespace ops {

// An invalid-blob Status with a printf-style message.
Status Fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// --- validation --------------------------------------------------------------

// Tensor `op.inputs[slot]` (or outputs when `output`), must be present.
TensorInfo InputTensor(const Model& m, const OpInfo& op, uint32_t slot);
TensorInfo OutputTensor(const Model& m, const OpInfo& op, uint32_t slot);

// dtype and (when rank != 0) rank of a tensor; `what` names it in messages.
Status ExpectTensor(const TensorInfo& t, const char* what, xts3::DType dtype, uint32_t rank);
// Constant tensor of `dtype` with exactly `elements` elements.
Status ExpectConstVector(const TensorInfo& t, const char* what, xts3::DType dtype,
                         uint32_t elements);
Status ExpectSameShape(const TensorInfo& a, const char* what_a, const TensorInfo& b,
                       const char* what_b);
// Same scale and zero point (ops that move data without requantizing).
Status ExpectSameQuant(const TensorInfo& a, const char* what_a, const TensorInfo& b,
                       const char* what_b);
Status ExpectRange(int32_t value, const char* what, int32_t lo, int32_t hi);
// act_min <= act_max, both in int8 range.
Status ExpectActivationRange(int32_t act_min, int32_t act_max);

// The int8 kernels accumulate bias + sum((x + input_offset) * w) in int32 and
// MBQM shifts that sum left by max(shift, 0) in int32; both wrap past int32
// (the sum is undefined behaviour in C). Bound the worst case of each of
// `rows` rows from its constant weights and bias and reject a layer that
// could leave int32. Row r reads the weights w[r * row_stride + t * tap_stride],
// t < taps; `bias` may be null; `what` names a row in the message
// ("output channel", "w_ih row").
Status CheckAccumulatorRows(const int8_t* w, const uint8_t* bias, const uint8_t* shift,
                            uint32_t rows, uint64_t taps, uint64_t row_stride,
                            uint64_t tap_stride, int32_t input_offset, const char* what);

// int32 element i of a little-endian constant or table (memcpy keeps the load
// legal at any alignment and compiles to a plain load).
inline int32_t LoadI32(const uint8_t* p, uint32_t i) {
  int32_t v;
  memcpy(&v, p + 4u * i, 4);
  return v;
}

// --- arithmetic (TFLite integer reference semantics) --------------------------

// SaturatingRoundingDoublingHighMul.
inline int32_t SRDHM(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  int64_t ab = (int64_t)a * (int64_t)b;
  int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
  int64_t sum = ab + nudge;
  // Division rounding toward zero, as TFLite's reference does.
  return (int32_t)(sum / (1LL << 31));
}

// RoundingDivideByPOT: round to nearest, ties away from zero.
inline int32_t RDBP(int32_t x, int exponent) {
  const int32_t mask = (int32_t)((1LL << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// MultiplyByQuantizedMultiplier with TFLite's default double rounding;
// shift > 0 is a left shift. The left shift wraps like ESP-NN's.
inline int32_t MBQM(int32_t x, int32_t mult, int32_t shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  const int32_t shifted = (int32_t)((uint32_t)x << left);
  return RDBP(SRDHM(shifted, mult), right);
}

inline int32_t Clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

}  // namespace ops
}  // namespace espnn
