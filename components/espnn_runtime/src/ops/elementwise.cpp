// ADD and MUL on int8 with numpy-style broadcasting (ranks up to 5, shapes
// aligned at the trailing end, size-1 dims broadcast).
//
// ESP-NN's add/mul take equal-sized flat inputs only, plus one broadcast
// multiply ([spatial, C] * [C], the squeeze-excite pattern). So:
//   * equal shapes                       -> one ESP-NN call over all elements;
//   * MUL [..., C] by [C] / [1,..,1,C]    -> esp_nn_mul_broadcast_channel_s8;
//   * other broadcasts                   -> a stride loop in the interpreter:
//     ESP-NN calls on contiguous inner runs when the innermost dims are not
//     broadcast, otherwise a per-element loop with the same arithmetic as
//     ESP-NN (TFLite's integer Add / Mul).
#include <stdio.h>

#include "ops/espnn_api.h"
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

// ------------------------------------------------------------------ shapes

// Dimension d (0 = outermost) of `t` seen at rank `rank`, i.e. with leading
// 1s added as numpy does.
uint32_t AlignedDim(const TensorInfo& t, uint32_t rank, uint32_t d) {
  const uint32_t lead = rank - t.rank;
  return d < lead ? 1u : t.dims[d - lead];
}

bool BroadcastShape(const TensorInfo& a, const TensorInfo& b, uint32_t* rank,
                    uint32_t dims[kMaxRank]) {
  *rank = a.rank > b.rank ? a.rank : b.rank;
  for (uint32_t d = 0; d < *rank; ++d) {
    const uint32_t da = AlignedDim(a, *rank, d), db = AlignedDim(b, *rank, d);
    if (da != db && da != 1 && db != 1) return false;
    dims[d] = da == 1 ? db : da;
  }
  return true;
}

// "[2,3,4]" into buf (large enough for 5 dims of up to 8 digits).
const char* FormatDims(char (&buf)[48], uint32_t rank, const uint32_t* dims) {
  int pos = snprintf(buf, sizeof(buf), "[");
  for (uint32_t d = 0; d < rank && pos > 0 && pos < (int)sizeof(buf); ++d)
    pos += snprintf(buf + pos, sizeof(buf) - pos, d ? ",%u" : "%u", (unsigned)dims[d]);
  if (pos > 0 && pos < (int)sizeof(buf)) snprintf(buf + pos, sizeof(buf) - pos, "]");
  return buf;
}

Status ValidateOperands(const Model& m, const OpInfo& op) {
  const TensorInfo a = ops::InputTensor(m, op, 0), b = ops::InputTensor(m, op, 1);
  const TensorInfo out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(a, "input1", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(b, "input2", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  uint32_t rank, dims[kMaxRank];
  char s1[48], s2[48];
  if (!BroadcastShape(a, b, &rank, dims))
    return ops::Fail("input1 dims %s and input2 dims %s are not broadcastable",
                     FormatDims(s1, a.rank, a.dims), FormatDims(s2, b.rank, b.dims));
  bool same = out.rank == rank;
  for (uint32_t d = 0; same && d < rank; ++d) same = out.dims[d] == dims[d];
  if (!same)
    return ops::Fail("output dims %s, expected %s (input1 and input2 broadcast)",
                     FormatDims(s1, out.rank, out.dims), FormatDims(s2, rank, dims));
  return Status::Ok();
}

// The output broadcast as nested loops: `outer_rank` outer dims (with the
// operands' element strides, 0 where an operand is broadcast) around an
// inner run of `run` output elements in which the operands advance by
// run_step_a / run_step_b (1, or 0 for a broadcast operand).
struct BroadcastPlan {
  uint32_t outer_rank;
  uint32_t dims[kMaxRank];
  uint32_t stride_a[kMaxRank];
  uint32_t stride_b[kMaxRank];
  uint32_t run;
  uint32_t run_step_a, run_step_b;
};

void MakePlan(const TensorInfo& a, const TensorInfo& b, const TensorInfo& out,
              BroadcastPlan* plan) {
  const uint32_t rank = out.rank;
  uint32_t sa[kMaxRank], sb[kMaxRank];
  uint32_t ea = 1, eb = 1;  // contiguous strides, innermost first
  for (uint32_t k = 0; k < rank; ++k) {
    const uint32_t d = rank - 1 - k;
    const uint32_t da = AlignedDim(a, rank, d), db = AlignedDim(b, rank, d);
    sa[d] = da == 1 ? 0 : ea;
    sb[d] = db == 1 ? 0 : eb;
    ea *= da;
    eb *= db;
  }
  // Inner dims where neither operand broadcasts form one contiguous run.
  uint32_t inner = 0, run = 1;
  while (inner < rank) {
    const uint32_t d = rank - 1 - inner;
    if (AlignedDim(a, rank, d) != AlignedDim(b, rank, d)) break;
    run *= out.dims[d];
    ++inner;
  }
  if (inner > 0) {
    plan->run = run;
    plan->run_step_a = plan->run_step_b = 1;
  } else {
    // The innermost dim broadcasts one operand: it becomes the run, walked
    // element by element.
    inner = 1;
    plan->run = out.dims[rank - 1];
    plan->run_step_a = sa[rank - 1] ? 1 : 0;
    plan->run_step_b = sb[rank - 1] ? 1 : 0;
  }
  plan->outer_rank = rank - inner;
  for (uint32_t d = 0; d < plan->outer_rank; ++d) {
    plan->dims[d] = out.dims[d];
    plan->stride_a[d] = sa[d];
    plan->stride_b[d] = sb[d];
  }
}

// Calls fn(a_offset, b_offset, out_offset) once per inner run, in output
// order. Offsets stay below the operands' element counts (< 2^31).
template <typename Fn>
void ForEachRun(const BroadcastPlan& plan, uint32_t out_elements, Fn fn) {
  uint32_t idx[kMaxRank] = {0};
  uint32_t oa = 0, ob = 0;
  for (uint32_t oo = 0; oo < out_elements; oo += plan.run) {
    fn(oa, ob, oo);
    for (uint32_t k = plan.outer_rank; k-- > 0;) {
      if (++idx[k] < plan.dims[k]) {
        oa += plan.stride_a[k];
        ob += plan.stride_b[k];
        break;
      }
      idx[k] = 0;
      oa -= plan.stride_a[k] * (plan.dims[k] - 1);
      ob -= plan.stride_b[k] * (plan.dims[k] - 1);
    }
  }
}

// The two inputs and the output of an ADD or MUL at run time.
struct Operands {
  TensorInfo ta, tb, to;
  const int8_t* a;
  const int8_t* b;
  int8_t* out;
  uint32_t n;  // output elements
  bool same_size() const { return ta.num_elements() == n && tb.num_elements() == n; }
};

Operands ReadOperands(const OpInfo& op, const EvalContext& ctx) {
  const TensorInfo to = ctx.tensor(op.outputs[0]);
  return {ctx.tensor(op.inputs[0]), ctx.tensor(op.inputs[1]), to,
          (const int8_t*)ctx.in(op.inputs[0]), (const int8_t*)ctx.in(op.inputs[1]),
          (int8_t*)ctx.out(op.outputs[0]), to.num_elements()};
}

// A binary op with params P: contiguous(a, b, out, n, p) over all elements
// when no input broadcasts, or on the inner runs where both advance element
// by element; otherwise one(x1, x2, p) per element.
template <typename P, typename ContiguousFn, typename OneFn>
void EvalBinary(const Operands& x, const P& p, ContiguousFn contiguous, OneFn one) {
  const int8_t* a = x.a;
  const int8_t* b = x.b;
  int8_t* out = x.out;
  const uint32_t n = x.n;
  if (x.same_size()) {
    contiguous(a, b, out, n, p);
    return;
  }
  BroadcastPlan plan;
  MakePlan(x.ta, x.tb, x.to, &plan);
  if (plan.run_step_a && plan.run_step_b) {
    ForEachRun(plan, n, [&](uint32_t oa, uint32_t ob, uint32_t oo) {
      contiguous(a + oa, b + ob, out + oo, plan.run, p);
    });
  } else {
    ForEachRun(plan, n, [&](uint32_t oa, uint32_t ob, uint32_t oo) {
      const int8_t* pa = a + oa;
      const int8_t* pb = b + ob;
      for (uint32_t i = 0; i < plan.run; ++i, pa += plan.run_step_a, pb += plan.run_step_b)
        out[oo + i] = one(*pa, *pb, p);
    });
  }
}

// Whether operand `a` is the full output shape and `b` is [C] or [1,..,1,C]
// with C the output's last dim (one vector broadcast to every position).
bool IsChannelBroadcast(const TensorInfo& a, const TensorInfo& b, const TensorInfo& out) {
  const uint32_t c = out.inner(0);
  return out.rank >= 2 && a.num_elements() == out.num_elements() && b.inner(0) == c &&
         b.num_elements() == c && c != out.num_elements();
}

bool Aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }

// ESP-NN's contiguous S3 bodies take 16-byte aligned operands (see
// AddContiguous, MulContiguous).
bool S3ContiguousAligned(const void* a, const void* b, const void* out) {
  return Aligned16(a) && Aligned16(b) && Aligned16(out);
}

// ------------------------------------------------------------------ ADD

Status ValidateAdd(const Model& m, const OpInfo& op) {
  ESPNN_RETURN_IF_ERROR(ValidateOperands(m, op));
  const auto p = op.Params<ADD_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input1_offset, "input1_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input2_offset, "input2_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_offset, "output_offset", -128, 127));
  // |x + offset| <= 255 < 2^8: shifted left by up to 20 it stays below 2^28,
  // and the sum of the two rescaled inputs (each no larger) below 2^29.
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.left_shift, "left_shift", 0, 20));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input1_mult, "input1_mult", 0, INT32_MAX));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input2_mult, "input2_mult", 0, INT32_MAX));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_mult, "output_mult", 0, INT32_MAX));
  // ESP-NN's add takes right shifts only (exponents <= 0).
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input1_shift, "input1_shift", -31, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input2_shift, "input2_shift", -31, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_shift, "output_shift", -31, 0));
  return ops::ExpectActivationRange(p.act_min, p.act_max);
}

// One element of ESP-NN's (= TFLite's) int8 add; validate bounds every
// intermediate well inside int32.
inline int8_t AddOne(int32_t x1, int32_t x2, const ADD_Params& p) {
  const int32_t scale = (int32_t)1 << p.left_shift;
  const int32_t a = ops::RDBP(ops::SRDHM((x1 + p.input1_offset) * scale, p.input1_mult),
                              -p.input1_shift);
  const int32_t b = ops::RDBP(ops::SRDHM((x2 + p.input2_offset) * scale, p.input2_mult),
                              -p.input2_shift);
  const int32_t y =
      ops::RDBP(ops::SRDHM(a + b, p.output_mult), -p.output_shift) + p.output_offset;
  return (int8_t)ops::Clamp(y, p.act_min, p.act_max);
}

void AddContiguous(const int8_t* a, const int8_t* b, int8_t* out, uint32_t n,
                   const ADD_Params& p) {
  // The ESP32-S3 SIMD body runs when both inputs are 16-byte aligned and
  // stores 8 output bytes at a time without checking the output's
  // alignment; other pointer combinations go to the plain C version.
  if (S3ContiguousAligned(a, b, out)) {
    esp_nn_add_elementwise_s8(a, b, p.input1_offset, p.input2_offset, p.input1_mult,
                              p.input2_mult, p.input1_shift, p.input2_shift, p.left_shift, out,
                              p.output_offset, p.output_mult, p.output_shift, p.act_min,
                              p.act_max, (int32_t)n);
  } else {
    esp_nn_add_elementwise_s8_ansi(a, b, p.input1_offset, p.input2_offset, p.input1_mult,
                                   p.input2_mult, p.input1_shift, p.input2_shift, p.left_shift,
                                   out, p.output_offset, p.output_mult, p.output_shift,
                                   p.act_min, p.act_max, (int32_t)n);
  }
}

// In place (xts3_format.h ESPNN_XTS3_ALIASING): the output may be exactly an
// input of the output's size; every path (ESP-NN's contiguous kernels, the
// broadcast runs) reads element i of both inputs before writing element i, and
// such an input is indexed like the output.
Status EvalAdd(const OpInfo& op, const EvalContext& ctx) {
  EvalBinary(ReadOperands(op, ctx), op.Params<ADD_Params>(), AddContiguous, AddOne);
  return Status::Ok();
}

// ------------------------------------------------------------------ MUL

Status ValidateMul(const Model& m, const OpInfo& op) {
  ESPNN_RETURN_IF_ERROR(ValidateOperands(m, op));
  const auto p = op.Params<MUL_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input1_offset, "input1_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.input2_offset, "input2_offset", -127, 128));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_offset, "output_offset", -128, 127));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_mult, "output_mult", 0, INT32_MAX));
  // |(x1 + o1)(x2 + o2)| <= 255^2 < 2^16, so a left shift up to 14 keeps the
  // shifted product inside int32.
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.output_shift, "output_shift", -31, 14));
  return ops::ExpectActivationRange(p.act_min, p.act_max);
}

inline int8_t MulOne(int32_t x1, int32_t x2, const MUL_Params& p) {
  const int32_t prod = (x1 + p.input1_offset) * (x2 + p.input2_offset);
  const int32_t y = ops::MBQM(prod, p.output_mult, p.output_shift) + p.output_offset;
  return (int8_t)ops::Clamp(y, p.act_min, p.act_max);
}

void MulContiguous(const int8_t* a, const int8_t* b, int8_t* out, uint32_t n,
                   const MUL_Params& p) {
  // ESP-NN 1.2.3's ESP32-S3 mul is bit-exact only in its SIMD body (16-byte
  // aligned inputs, 8 elements per step, 8-byte stores to an unchecked
  // output); its scalar loop (short, unaligned or the n % 8 tail) rounds
  // negative products differently. That part goes to the C version.
  uint32_t head = 0;
  if (S3ContiguousAligned(a, b, out)) head = n & ~7u;
  if (head > 0)
    esp_nn_mul_elementwise_s8(a, b, p.input1_offset, p.input2_offset, out, p.output_offset,
                              p.output_mult, p.output_shift, p.act_min, p.act_max,
                              (int32_t)head);
  if (n > head)
    esp_nn_mul_elementwise_s8_ansi(a + head, b + head, p.input1_offset, p.input2_offset,
                                   out + head, p.output_offset, p.output_mult, p.output_shift,
                                   p.act_min, p.act_max, (int32_t)(n - head));
}

Status EvalMul(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<MUL_Params>();
  const Operands x = ReadOperands(op, ctx);
  // Squeeze-excite: a per-channel vector times a feature map (never the case
  // for equal sizes). The product is symmetric, so either operand order maps
  // onto ESP-NN's (map, vector).
  const bool a_map = IsChannelBroadcast(x.ta, x.tb, x.to);
  if (a_map || IsChannelBroadcast(x.tb, x.ta, x.to)) {
    const uint32_t c = x.to.inner(0);
    esp_nn_mul_broadcast_channel_s8(a_map ? x.a : x.b, a_map ? x.b : x.a,
                                    a_map ? p.input1_offset : p.input2_offset,
                                    a_map ? p.input2_offset : p.input1_offset, x.out,
                                    p.output_offset, p.output_mult, p.output_shift, p.act_min,
                                    p.act_max, (int32_t)(x.n / c), (int32_t)c);
    return Status::Ok();
  }
  EvalBinary(x, p, MulContiguous, MulOne);
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
// ESP-NN 1.2.3's S3 add and mul: the asm SIMD body when the size reaches
// `min_size` and the operands are 16-byte aligned; broadcasting is not an
// ESP-NN case (the interpreter's runs), except mul's [S,C] x [C].
void DescribeBinary(const Operands& x, uint32_t min_size, const char* simd_kernel, const char* scalar_kernel,
                    const char* misaligned_kernel, S3Route* r) {
  if (!x.same_size()) {
    SetS3Route(r, false, 0.0, "interpreter broadcast loop", "broadcasting: ESP-NN add/mul take equal sizes only");
  } else if (x.n < min_size) {
    SetS3Route(r, false, 0.0, scalar_kernel, "size < %u", (unsigned)min_size);
  } else if (!S3ContiguousAligned(x.a, x.b, x.out)) {
    SetS3Route(r, false, 0.0, misaligned_kernel, "operands not 16-byte aligned");
  } else {
    SetS3Route(r, true, 1.0, simd_kernel, "size >= %u, operands 16-byte aligned (arena offsets)", (unsigned)min_size);
  }
}

void DescribeAdd(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  DescribeBinary(ReadOperands(op, ctx), 12, "esp_nn_add_elementwise_s8_esp32s3", "add scalar loop",
                 "esp_nn_add_elementwise_s8_ansi", r);
}

void DescribeMul(const OpInfo& op, const EvalContext& ctx, S3Route* r) {
  const Operands x = ReadOperands(op, ctx);
  const bool a_map = IsChannelBroadcast(x.ta, x.tb, x.to);
  if (a_map || IsChannelBroadcast(x.tb, x.ta, x.to)) {
    // ESP-NN's S3 routine vectorizes rows of >= 8 channels that start 16-byte aligned.
    const uint32_t c = x.to.inner(0);
    if (c >= 8 && c % 16 == 0 && Aligned16(a_map ? x.a : x.b) && Aligned16(x.out))
      SetS3Route(r, true, 1.0, "esp_nn_mul_broadcast_channel_s8_esp32s3",
                 "[S,C] x [C], channels >= 8, rows 16-byte aligned");
    else
      SetS3Route(r, false, 0.0, "mul_broadcast_channel scalar", "channels < 8 or rows not 16-byte aligned");
    return;
  }
  DescribeBinary(x, 8, "esp_nn_mul_elementwise_s8_esp32s3", "mul scalar loop", "esp_nn_mul_elementwise_s8_ansi", r);
}

const char* const kAddS3Kernels[] = {"interpreter broadcast loop", "add scalar loop", "esp_nn_add_elementwise_s8_ansi",
                                     "esp_nn_add_elementwise_s8_esp32s3", nullptr};
const char* const kMulS3Kernels[] = {"esp_nn_mul_broadcast_channel_s8_esp32s3", "mul_broadcast_channel scalar",
                                     "interpreter broadcast loop", "mul scalar loop", "esp_nn_mul_elementwise_s8_ansi",
                                     "esp_nn_mul_elementwise_s8_esp32s3", nullptr};
const S3RouteRule kAddS3Rule = {
    "§5.1 add: asm SIMD body when size >= 12 and both inputs 16-byte aligned (output 8-byte aligned); "
    "broadcasting is not an ESP-NN case.",
    kAddS3Kernels, DescribeAdd};
const S3RouteRule kMulS3Rule = {
    "§5.1 mul: asm SIMD body when size >= 8 and both inputs 16-byte aligned (output 8-byte aligned); "
    "broadcasting is not an ESP-NN case, except a channel vector times a map "
    "(esp_nn_mul_broadcast_channel_s8: SIMD for >= 8 channels in 16-byte aligned rows).",
    kMulS3Kernels, DescribeMul};
#endif

}  // namespace

extern const OpKernel kAddKernel = {ValidateAdd, nullptr, EvalAdd ESPNN_S3_ROUTE(kAddS3Rule)};
extern const OpKernel kMulKernel = {ValidateMul, nullptr, EvalMul ESPNN_S3_ROUTE(kMulS3Rule)};

}  // namespace espnn
