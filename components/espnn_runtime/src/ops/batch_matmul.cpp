// BATCH_MATMUL: int8 activation x int8 activation (attention's q @ k^T and
// attn @ v), one per-tensor requantization, on ESP-NN's
// esp_nn_fully_connected_s8.
//
// For one batch, FC computes out[n] = MBQM(sum_k (x[k] + in_off) *
// (w[n, k] + filter_off)) + out_off for one input row x: exactly one row of
// lhs @ rhs when the "filter" w is rhs laid out [N, K]. The lowering picks
// that layout where the graph already has it (k of q @ k^T: rhs_transposed =
// 1, no copy); otherwise (rhs [K, N], as v of attn @ v) the batch's rhs is
// transposed into the scratch once and then used as the filter, so every
// layout runs on the same ESP-NN kernel.
//
// Inputs: 0 lhs int8 [B..., M, K], 1 rhs int8 [B..., N, K] (rhs_transposed)
// or [B..., K, N]; arena or constant. Output int8 [B..., M, N]. All three
// have the same rank (2..5); each batch dim of lhs and rhs equals the
// output's or is 1 (broadcast).
#include <stdio.h>
#include <string.h>

#include "ops/espnn_api.h"
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

// Same reasons as FULLY_CONNECTED (fully_connected.cpp): ESP-NN's S3 fast
// path keeps an int32 per output channel on the stack, and it needs 16-byte
// aligned input rows (esp-nn issue #34).
constexpr uint32_t kChannelsPerCall = 128;
constexpr uint32_t kAlign = 16;

uint32_t RoundUp(uint32_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

struct Geometry {
  uint32_t rank, m, k, n;
};

Geometry GeometryOf(const TensorInfo& lhs, const TensorInfo& rhs, bool rhs_transposed) {
  Geometry g;
  g.rank = lhs.rank;
  g.m = lhs.inner(1);
  g.k = lhs.inner(0);
  g.n = rhs_transposed ? rhs.inner(1) : rhs.inner(0);
  return g;
}

// Scratch: the transposed rhs of one batch (only when rhs is [K, N]), then
// one aligned copy of an lhs row (only when rows can be misaligned).
// N * K <= the rhs tensor's bytes < 2^31 and K <= 65535, so the sum fits.
uint32_t TransposeBytes(const Geometry& g, bool rhs_transposed) {
  return rhs_transposed ? 0 : RoundUp(g.n * g.k);
}
uint32_t RowCopyBytes(const Geometry& g) { return g.k % kAlign != 0 ? RoundUp(g.k) : 0; }

// max |q + offset| over int8 q.
int64_t MaxMagnitude(int32_t offset) {
  const int64_t lo = -128 + (int64_t)offset, hi = 127 + (int64_t)offset;
  return hi > -lo ? hi : -lo;
}

Status ValidateBatchMatmul(const Model& m, const OpInfo& op) {
  const TensorInfo lhs = ops::InputTensor(m, op, 0);
  const TensorInfo rhs = ops::InputTensor(m, op, 1);
  const TensorInfo out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(lhs, "lhs", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(rhs, "rhs", DType::INT8, lhs.rank));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, lhs.rank));
  if (lhs.rank < 2) return ops::Fail("lhs has rank %u, expected 2 or more", (unsigned)lhs.rank);
  if (out.memory != Memory::ARENA) return ops::Fail("output must be an arena tensor");

  const auto p = op.Params<BATCH_MATMUL_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.rhs_transposed, "rhs_transposed", 0, 1));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.lhs_offset, "lhs_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.rhs_offset, "rhs_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_offset, "output_offset", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.mult, "mult", 0, INT32_MAX));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.shift, "shift", -31, 30));
  ESPNN_RETURN_IF_ERROR(ops::ExpectActivationRange(p.act_min, p.act_max));

  const bool rhs_transposed = p.rhs_transposed == 1;
  const Geometry g = GeometryOf(lhs, rhs, rhs_transposed);
  const uint32_t rhs_k = rhs_transposed ? rhs.inner(0) : rhs.inner(1);
  if (rhs_k != g.k)
    return ops::Fail("rhs inner dim %u != lhs last dim %u (rhs_transposed = %d)", (unsigned)rhs_k,
                     (unsigned)g.k, (int)p.rhs_transposed);
  // ESP-NN takes row_len (K) and out_channels (N) as uint16_t.
  if (g.k > kMaxKernelDim)
    return ops::Fail("K = %u exceeds %u", (unsigned)g.k, (unsigned)kMaxKernelDim);
  if (g.n > kMaxKernelDim)
    return ops::Fail("N = %u exceeds %u", (unsigned)g.n, (unsigned)kMaxKernelDim);
  if (out.inner(1) != g.m || out.inner(0) != g.n)
    return ops::Fail("output dims [..,%u,%u], expected [..,%u,%u]", (unsigned)out.inner(1),
                     (unsigned)out.inner(0), (unsigned)g.m, (unsigned)g.n);
  for (uint32_t d = 0; d + 2 < g.rank; ++d) {
    const uint32_t o = out.dims[d];
    if ((lhs.dims[d] != o && lhs.dims[d] != 1) || (rhs.dims[d] != o && rhs.dims[d] != 1) ||
        (lhs.dims[d] != o && rhs.dims[d] != o))
      return ops::Fail("batch dims[%u]: lhs %u, rhs %u, output %u do not broadcast", (unsigned)d,
                       (unsigned)lhs.dims[d], (unsigned)rhs.dims[d], (unsigned)o);
  }

  // The int32 accumulator (ESP-NN's and TFLite's) must not overflow, nor
  // its left shift by max(shift, 0): |acc| <= K * max|lhs + off| * max|rhs + off|.
  const int64_t a_max = MaxMagnitude(p.lhs_offset), b_max = MaxMagnitude(p.rhs_offset);
  const int64_t bound = (int64_t)g.k * a_max * b_max;  // < 2^16 * 2^8 * 2^8
  const int64_t limit = p.shift > 0 ? (int64_t)(INT32_MAX >> p.shift) : (int64_t)INT32_MAX;
  if (bound > limit)
    return ops::Fail("K = %u: the accumulator (up to %lld), shifted left by %d, can exceed int32",
                     (unsigned)g.k, (long long)bound, (int)(p.shift > 0 ? p.shift : 0));
  return Status::Ok();
}

uint32_t BatchMatmulScratch(const Model& m, const OpInfo& op) {
  const bool rhs_transposed = op.Params<BATCH_MATMUL_Params>().rhs_transposed == 1;
  const Geometry g = GeometryOf(ops::InputTensor(m, op, 0), ops::InputTensor(m, op, 1), rhs_transposed);
  return TransposeBytes(g, rhs_transposed) + RowCopyBytes(g);
}

// Element offset of a batch's [rows, cols] matrix in `t`, for the output
// batch whose index along each batch dim is idx[d] (0 where t broadcasts).
uint32_t BatchOffset(const TensorInfo& t, const uint32_t* idx, uint32_t batch_rank) {
  uint32_t offset = 0;
  for (uint32_t d = 0; d < batch_rank; ++d) offset = offset * t.dims[d] + (t.dims[d] == 1 ? 0 : idx[d]);
  return offset * t.inner(0) * t.inner(1);
}

Status EvalBatchMatmul(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<BATCH_MATMUL_Params>();
  const TensorInfo lhs = ctx.tensor(op.inputs[0]);
  const TensorInfo rhs = ctx.tensor(op.inputs[1]);
  const TensorInfo out = ctx.tensor(op.outputs[0]);
  const bool rhs_transposed = p.rhs_transposed == 1;
  const Geometry g = GeometryOf(lhs, rhs, rhs_transposed);
  const uint32_t transpose_bytes = TransposeBytes(g, rhs_transposed);
  if (ctx.scratch_bytes < transpose_bytes + RowCopyBytes(g) ||
      (transpose_bytes + RowCopyBytes(g) != 0 && ctx.scratch == nullptr))
    return ops::Fail("BATCH_MATMUL needs %u scratch bytes", (unsigned)(transpose_bytes + RowCopyBytes(g)));
  int8_t* filter_copy = (int8_t*)ctx.scratch;
  int8_t* row_copy = (int8_t*)ctx.scratch + transpose_bytes;

  const int8_t* lhs_data = (const int8_t*)ctx.in(op.inputs[0]);
  const int8_t* rhs_data = (const int8_t*)ctx.in(op.inputs[1]);
  int8_t* out_data = (int8_t*)ctx.out(op.outputs[0]);

  const uint32_t batch_rank = g.rank - 2;
  const uint32_t batches = out.num_elements() / (g.m * g.n);
  uint32_t idx[kMaxRank] = {0};
  uint32_t transposed_from = UINT32_MAX;  // rhs offset now in filter_copy
  for (uint32_t b = 0; b < batches; ++b) {
    const int8_t* a = lhs_data + BatchOffset(lhs, idx, batch_rank);
    const uint32_t rhs_offset = BatchOffset(rhs, idx, batch_rank);
    const int8_t* filter = rhs_data + rhs_offset;
    if (!rhs_transposed) {
      if (rhs_offset != transposed_from) {  // a broadcast rhs is transposed once
        for (uint32_t kk = 0; kk < g.k; ++kk)
          for (uint32_t nn = 0; nn < g.n; ++nn) filter_copy[nn * g.k + kk] = filter[kk * g.n + nn];
        transposed_from = rhs_offset;
      }
      filter = filter_copy;
    }
    int8_t* o = out_data + b * g.m * g.n;
    for (uint32_t row = 0; row < g.m; ++row) {
      const int8_t* x = a + row * g.k;
      // Rows are aligned whenever K % 16 == 0 (arena and constants are), which
      // is when no row copy is reserved.
      if (((uintptr_t)x & (kAlign - 1)) != 0 && RowCopyBytes(g) != 0) {
        memcpy(row_copy, x, g.k);
        x = row_copy;
      }
      for (uint32_t c = 0; c < g.n; c += kChannelsPerCall) {
        const uint32_t count = g.n - c < kChannelsPerCall ? g.n - c : kChannelsPerCall;
        // ESP-NN's argument order is shift before mult.
        esp_nn_fully_connected_s8(x, p.lhs_offset, (uint16_t)g.k, filter + c * g.k, p.rhs_offset,
                                  nullptr, o + row * g.n + c, (uint16_t)count, p.output_offset,
                                  p.shift, p.mult, p.act_min, p.act_max);
      }
    }
    // Next output batch index (row-major over the batch dims).
    for (uint32_t d = batch_rank; d-- > 0;) {
      if (++idx[d] < out.dims[d]) break;
      idx[d] = 0;
    }
  }
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
// esp_nn_fully_connected_s8 per output row, the rhs as its filter.
void DescribeBatchMatmul(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  DescribeS3FullyConnectedCall(r, op.Params<BATCH_MATMUL_Params>().rhs_offset, ctx.tensor(op.inputs[0]).inner(0),
                               "rhs_offset", "K");
}

const S3RouteRule kBatchMatmulS3Rule = {
    "BATCH_MATMUL is esp_nn_fully_connected_s8 per output row (the rhs is the filter, rhs_offset its "
    "filter_offset), so §5.1 FC applies: filter_offset == 0 and K >= 16 -> ACCX dot product, else the s16 asm. "
    "[runtime: an rhs [K, N] is transposed into the scratch per batch first (interpreter copy, no MACs); "
    "misaligned lhs rows are copied to the aligned scratch.]",
    kS3FullyConnectedKernels, DescribeBatchMatmul};
#endif

}  // namespace

extern const OpKernel kBatchMatmulKernel = {ValidateBatchMatmul, BatchMatmulScratch,
                                            EvalBatchMatmul ESPNN_S3_ROUTE(kBatchMatmulS3Rule)};

}  // namespace espnn
