// Element-wise int8 activations:
//  - HARD_SWISH: TFLite's int8 HardSwish (ESP-NN's esp_nn_hard_swish_s8).
//  - LUT: y = table[(uint8_t)x] with a 256-entry int8 table computed ahead
//    of time (sigmoid, tanh, SiLU, GELU, ...). The table encodes both the
//    function and the input/output quantization, so the output may be
//    quantized differently from the input.
//  - CHANNEL_LUT: the same with one table per index along one dimension
//    (per-channel functions: prelu with a slope per channel).
#include "ops/espnn_api.h"
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

Status ValidateHardSwish(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  const auto p = op.Params<HARD_SWISH_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input_zero_point, "input_zero_point", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_zero_point, "output_zero_point", -128, 127));
  // ESP-NN takes the Q15 multipliers as int16_t: a wider value would be
  // truncated silently.
  ESPNN_RETURN_IF_ERROR(
      ops::ExpectRange(p.output_mult_fxp, "output_mult_fxp", INT16_MIN, INT16_MAX));
  ESPNN_RETURN_IF_ERROR(
      ops::ExpectRange(p.reluish_mult_fxp, "reluish_mult_fxp", INT16_MIN, INT16_MAX));
  // The algorithm only divides by the output exponent (<= 0), and both
  // exponents become shift counts of 0..31.
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_mult_exp, "output_mult_exp", -31, 0));
  return ops::ExpectRange(p.reluish_mult_exp, "reluish_mult_exp", -31, 31);
}

// 512 bytes on ESP32-S3 (a per-call LUT); on other targets
// esp_nn_get_hard_swish_scratch_size() is a macro expanding to 0.
uint32_t HardSwishScratch(const Model&, const OpInfo&) {
  const int32_t bytes = (int32_t)esp_nn_get_hard_swish_scratch_size();
  return bytes > 0 ? (uint32_t)bytes : 0u;
}

// HARD_SWISH and LUT run in place (ESPNN_XTS3_ALIASING): both map element i
// to element i (ESP-NN's S3 hard-swish builds its LUT in scratch first).
Status EvalHardSwish(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<HARD_SWISH_Params>();
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  // On ESP32-S3 the scratch pointer is a process-wide global: register ours
  // right before the call. Elsewhere this macro expands to nothing.
  esp_nn_set_hard_swish_scratch_buf(ctx.scratch);
  esp_nn_hard_swish_s8((const int8_t*)ctx.in(op.inputs[0]), (int8_t*)ctx.out(op.outputs[0]),
                       (int32_t)in.num_elements(), (int16_t)p.input_zero_point,
                       (int16_t)p.output_mult_fxp, (int16_t)p.reluish_mult_fxp,
                       p.reluish_mult_exp, p.output_mult_exp, (int16_t)p.output_zero_point);
  return Status::Ok();
}

Status ValidateLut(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), table = ops::InputTensor(m, op, 1);
  const TensorInfo out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectConstVector(table, "table", DType::INT8, kLutEntries));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  return ops::ExpectSameShape(in, "input", out, "output");
}

Status EvalLut(const OpInfo& op, const EvalContext& ctx) {
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  const int8_t* table = (const int8_t*)ctx.in(op.inputs[1]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  const uint32_t n = ctx.tensor(op.inputs[0]).num_elements();
  // Entry j holds the output for the int8 input whose bit pattern is j.
  for (uint32_t i = 0; i < n; ++i) dst[i] = table[(uint8_t)src[i]];
  return Status::Ok();
}

Status ValidateChannelLut(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), table = ops::InputTensor(m, op, 1);
  const TensorInfo out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  const auto p = op.Params<CHANNEL_LUT_Params>();
  if (in.rank == 0) return ops::Fail("input must have rank >= 1");
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.axis, "axis", 0, (int32_t)in.rank - 1));
  const uint32_t channels = in.dims[p.axis];
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(table, "table", DType::INT8, 2));
  if (table.memory != Memory::CONSTANT) return ops::Fail("table must be a constant");
  if (table.dims[0] != channels || table.dims[1] != kLutEntries)
    return ops::Fail("table is [%u, %u], expected [%u, %u] (input dimension %d, LUT entries)",
                     (unsigned)table.dims[0], (unsigned)table.dims[1], (unsigned)channels,
                     (unsigned)kLutEntries, (int)p.axis);
  return Status::Ok();
}

Status EvalChannelLut(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const auto p = op.Params<CHANNEL_LUT_Params>();
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  const int8_t* tables = (const int8_t*)ctx.in(op.inputs[1]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  // The tensor is [outer, channels, inner]: every run of `inner` elements
  // shares one table. Element i is read before it is written (in place).
  uint32_t outer = 1, inner = 1;
  for (int32_t d = 0; d < p.axis; ++d) outer *= in.dims[d];
  for (uint32_t d = (uint32_t)p.axis + 1; d < in.rank; ++d) inner *= in.dims[d];
  const uint32_t channels = in.dims[p.axis];
  for (uint32_t o = 0; o < outer; ++o) {
    for (uint32_t c = 0; c < channels; ++c) {
      const int8_t* table = tables + (size_t)c * kLutEntries;
      for (uint32_t i = 0; i < inner; ++i, ++src, ++dst) *dst = table[(uint8_t)*src];
    }
  }
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
ESPNN_S3_SCALAR_ROUTE(kHardSwishS3Rule, "esp_nn_hard_swish_s8 (LUT C)",
                      "§5.1 hard_swish: per-call LUT built with ANSI");
#endif

}  // namespace

extern const OpKernel kHardSwishKernel = {ValidateHardSwish, HardSwishScratch,
                                          EvalHardSwish ESPNN_S3_ROUTE(kHardSwishS3Rule)};
extern const OpKernel kLutKernel = {ValidateLut, nullptr, EvalLut};
extern const OpKernel kChannelLutKernel = {ValidateChannelLut, nullptr, EvalChannelLut};

}  // namespace espnn
