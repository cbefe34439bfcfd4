// FULLY_CONNECTED on ESP-NN's esp_nn_fully_connected_s8 (per-tensor
// requantization) or esp_nn_fully_connected_per_ch_s8 (per output channel).
//
// Inputs: 0 input int8 [..., row_len] (every leading dim is a batch row),
// 1 filter int8 [out_ch, row_len] constant, 2 bias int32 [out_ch] constant or
// absent, 3 mult int32 constant [1] or [out_ch], 4 shift int32 constant, same
// length as mult. Output int8 [..., out_ch] with the input's leading dims.
#include <stdio.h>
#include <string.h>

#include "ops/espnn_api.h"
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

// ESP-NN 1.2.3's ESP32-S3 fast path keeps an int32 stack array per output
// channel of the call (4 * out_channels bytes), so one call with a
// 1000-class head would take ~4 KB of the calling task's stack. Feeding it
// at most this many channels per call bounds that to 512 bytes; the output
// channels are independent, so the split changes no result.
constexpr uint32_t kChannelsPerCall = 128;

// ESP-NN 1.2.3 on the ESP32-S3 gives wrong results when an FC input row is
// not 16-byte aligned (esp-nn issue #34). Rows after the first are aligned
// only if row_len is a multiple of 16; the others are copied to the scratch.
constexpr uint32_t kRowAlignment = 16;

bool NeedsRowCopy(uint32_t batch, uint32_t row_len) {
  return batch > 1 && row_len % kRowAlignment != 0;
}

Status ValidateFullyConnected(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0);
  const TensorInfo filter = ops::InputTensor(m, op, 1);
  const TensorInfo mult = ops::InputTensor(m, op, 3);
  const TensorInfo shift = ops::InputTensor(m, op, 4);
  const TensorInfo out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(filter, "filter", DType::INT8, 2));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  if (filter.memory != Memory::CONSTANT) return ops::Fail("filter must be a constant");

  const uint32_t out_ch = filter.dims[0], row_len = filter.dims[1];
  // ESP-NN takes both as uint16_t.
  if (row_len > kMaxKernelDim)
    return ops::Fail("filter dims [%u,%u]: row_len %u exceeds %u", (unsigned)out_ch,
                     (unsigned)row_len, (unsigned)row_len, (unsigned)kMaxKernelDim);
  if (out_ch > kMaxKernelDim)
    return ops::Fail("filter dims [%u,%u]: out_channels %u exceeds %u", (unsigned)out_ch,
                     (unsigned)row_len, (unsigned)out_ch, (unsigned)kMaxKernelDim);
  if (in.inner(0) != row_len)
    return ops::Fail("input last dim %u != filter row_len %u", (unsigned)in.inner(0),
                     (unsigned)row_len);
  if (out.rank != in.rank)
    return ops::Fail("output has rank %u, expected the input's rank %u", (unsigned)out.rank,
                     (unsigned)in.rank);
  for (uint32_t d = 0; d < out.rank; ++d) {
    const uint32_t want = d + 1 == out.rank ? out_ch : in.dims[d];
    if (out.dims[d] != want)
      return ops::Fail("output dims[%u] = %u, expected %u", (unsigned)d, (unsigned)out.dims[d],
                       (unsigned)want);
  }

  const bool has_bias = op.inputs[2] != kNoTensor;
  if (has_bias) {
    ESPNN_RETURN_IF_ERROR(
        ops::ExpectConstVector(ops::InputTensor(m, op, 2), "bias", DType::INT32, out_ch));
  }
  const uint32_t n_mult = mult.num_elements();
  if (n_mult != 1 && n_mult != out_ch)
    return ops::Fail("mult has %u elements, expected 1 (per-tensor) or out_channels = %u",
                     (unsigned)n_mult, (unsigned)out_ch);
  ESPNN_RETURN_IF_ERROR(ops::ExpectConstVector(mult, "mult", DType::INT32, n_mult));
  ESPNN_RETURN_IF_ERROR(ops::ExpectConstVector(shift, "shift", DType::INT32, n_mult));

  const auto p = op.Params<FULLY_CONNECTED_Params>();
  // Offsets of int8 zero points: -zp for the input and the filter, +zp out.
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input_offset, "input_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.filter_offset, "filter_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_offset, "output_offset", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectActivationRange(p.act_min, p.act_max));

  // ESP-NN accumulates sum((w + filter_offset)(x + input_offset)) + bias in
  // int32 and then left-shifts it by max(shift, 0) in int32; TFLite's
  // reference does the same. Both overflow silently (undefined behaviour in
  // ESP-NN's C). The filter and bias are constants, so the largest magnitude
  // any input can produce is known per channel; a layer that could leave
  // int32 is rejected instead of computing garbage on some inputs.
  const uint8_t* w = m.constant_data(filter);
  const uint8_t* bias = has_bias ? m.constant_data(ops::InputTensor(m, op, 2)) : nullptr;
  const uint8_t* mult_data = m.constant_data(mult);
  const uint8_t* shift_data = m.constant_data(shift);
  const int64_t x_lo = -128 + p.input_offset, x_hi = 127 + p.input_offset;
  const int64_t max_x = x_hi > -x_lo ? x_hi : -x_lo;
  for (uint32_t c = 0; c < n_mult; ++c) {
    char what[24];
    snprintf(what, sizeof(what), n_mult == 1 ? "mult" : "mult[%u]", (unsigned)c);
    ESPNN_RETURN_IF_ERROR(ops::ExpectRange(ops::LoadI32(mult_data, c), what, 0, INT32_MAX));
    snprintf(what, sizeof(what), n_mult == 1 ? "shift" : "shift[%u]", (unsigned)c);
    ESPNN_RETURN_IF_ERROR(ops::ExpectRange(ops::LoadI32(shift_data, c), what, -31, 30));
  }
  for (uint32_t o = 0; o < out_ch; ++o) {
    // sum |w + fo| <= 65535 * 256 and max_x <= 256: the product fits int64.
    int64_t wsum = 0;
    const int8_t* row = (const int8_t*)w + (uint64_t)o * row_len;
    for (uint32_t i = 0; i < row_len; ++i) {
      const int64_t v = (int64_t)row[i] + p.filter_offset;
      wsum += v < 0 ? -v : v;
    }
    int64_t bound = wsum * max_x;
    if (bias) {
      const int64_t b = ops::LoadI32(bias, o);
      bound += b < 0 ? -b : b;
    }
    const int32_t s = ops::LoadI32(shift_data, n_mult == 1 ? 0 : o);
    const int64_t limit = s > 0 ? (int64_t)(INT32_MAX >> s) : (int64_t)INT32_MAX;
    if (bound > limit)
      return ops::Fail("output channel %u: |bias| + sum|w + filter_offset| * %d, shifted left "
                       "by %d, can exceed int32",
                       (unsigned)o, (int)max_x, (int)(s > 0 ? s : 0));
  }
  return Status::Ok();
}

uint32_t FullyConnectedScratch(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0);
  const uint32_t row_len = ops::InputTensor(m, op, 1).dims[1];
  const uint32_t batch = in.num_elements() / row_len;
  if (!NeedsRowCopy(batch, row_len)) return 0;
  return (row_len + kRowAlignment - 1) / kRowAlignment * kRowAlignment;
}

Status EvalFullyConnected(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<FULLY_CONNECTED_Params>();
  const TensorInfo in = ctx.tensor(op.inputs[0]);
  const TensorInfo filter = ctx.tensor(op.inputs[1]);
  const uint32_t out_ch = filter.dims[0], row_len = filter.dims[1];
  const uint32_t batch = in.num_elements() / row_len;
  const bool per_channel = ctx.tensor(op.inputs[3]).num_elements() != 1;

  const int8_t* input = (const int8_t*)ctx.in(op.inputs[0]);
  const int8_t* weights = (const int8_t*)ctx.in(op.inputs[1]);
  const int32_t* bias = (const int32_t*)ctx.in(op.inputs[2]);  // nullptr when absent
  const int32_t* mult = (const int32_t*)ctx.in(op.inputs[3]);
  const int32_t* shift = (const int32_t*)ctx.in(op.inputs[4]);
  int8_t* output = (int8_t*)ctx.out(op.outputs[0]);
  if (NeedsRowCopy(batch, row_len) && (ctx.scratch == nullptr || ctx.scratch_bytes < row_len))
    return ops::Fail("FULLY_CONNECTED needs %u scratch bytes", (unsigned)row_len);

  for (uint32_t b = 0; b < batch; ++b) {
    const int8_t* row = input + b * row_len;
    if (((uintptr_t)row & (kRowAlignment - 1)) != 0) {
      memcpy(ctx.scratch, row, row_len);
      row = (const int8_t*)ctx.scratch;
    }
    int8_t* out_row = output + b * out_ch;
    for (uint32_t o = 0; o < out_ch; o += kChannelsPerCall) {
      const uint32_t n = out_ch - o < kChannelsPerCall ? out_ch - o : kChannelsPerCall;
      const int32_t* chunk_bias = bias ? bias + o : nullptr;
      // ESP-NN's argument order is shift before mult.
      if (per_channel) {
        esp_nn_fully_connected_per_ch_s8(row, p.input_offset, (uint16_t)row_len,
                                         weights + o * row_len, p.filter_offset, chunk_bias,
                                         out_row + o, (uint16_t)n, p.output_offset, shift + o,
                                         mult + o, p.act_min, p.act_max);
      } else {
        esp_nn_fully_connected_s8(row, p.input_offset, (uint16_t)row_len, weights + o * row_len,
                                  p.filter_offset, chunk_bias, out_row + o, (uint16_t)n,
                                  p.output_offset, shift[0], mult[0], p.act_min, p.act_max);
      }
    }
  }
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
void DescribeFullyConnected(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  DescribeS3FullyConnectedCall(r, op.Params<FULLY_CONNECTED_Params>().filter_offset,
                               ctx.tensor(op.inputs[1]).dims[1], "filter_offset", "row_len");
}

const S3RouteRule kFullyConnectedS3Rule = {
    "§5.1 FC: filter_offset == 0, row_len >= 16 and the input 16-byte aligned -> C loop with an ACCX dot "
    "product; otherwise the s16 asm (esp_nn_fc_s16_esp32s3). Both are vector paths. [runtime: ESP-NN 1.2.3 on "
    "the S3 gives wrong results for an input row that is not 16-byte aligned, so such rows are copied to the "
    "aligned scratch first.]",
    kS3FullyConnectedKernels, DescribeFullyConnected};
#endif

}  // namespace

extern const OpKernel kFullyConnectedKernel = {ValidateFullyConnected, FullyConnectedScratch,
                                               EvalFullyConnected ESPNN_S3_ROUTE(kFullyConnectedS3Rule)};

}  // namespace espnn
