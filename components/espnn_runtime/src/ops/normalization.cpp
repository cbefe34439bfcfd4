// LAYER_NORM: layer norm or RMS norm of an int8 tensor over its last
// dimension, int8 out. ESP-NN has no kernel for it; it runs here, in integer
// arithmetic only (no float), so x86-64, -m32 and Xtensa give the same bytes.
//
// Per row of N elements (docs/xts3-format.md, LAYER_NORM, is the reference):
//   d_j = x_j - input_zp                       |d_j| <= 255
//   S1  = sum d_j (layer norm) or 0 (RMS)      S2 = sum d_j^2
//   V   = N*S2 - S1^2                          N^2 * variance / input_scale^2
//   D   = (V << 14) + eps_term                 eps_term = eps * N^2 / scale^2 in Q14
//   z_j = (N*d_j - S1) * 2^7 / sqrt(D)         (x_j - mean) / sqrt(var + eps), Q22
//   y_j = z_j * G_j + beta_j                   G_j = gamma_j / output_scale
//   out = clamp(output_zp + round(y_j))
// 1/sqrt(D) is a normalised mantissa from an exact integer square root and
// one 64-bit division per row; every rounding is "add half, shift right".
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

static_assert(255ull * 255ull * kMaxNormWidth <= 0xFFFFFFFFull,
              "a row's sum of squares must fit uint32");

constexpr uint32_t kGammaMult = 1, kGammaShift = 2, kBeta = 3;

uint64_t EpsTerm(const LAYER_NORM_Params& p) {
  return ((uint64_t)(uint32_t)p.eps_hi << 32) | (uint32_t)p.eps_lo;
}

// Gamma is per channel ([N]) or one value for the whole row ([1]).
Status ExpectGammaVector(const TensorInfo& t, const char* what, uint32_t width) {
  const uint32_t n = t.num_elements();
  return ops::ExpectConstVector(t, what, DType::INT32, n == 1 ? 1u : width);
}

Status ValidateLayerNorm(const Model& m, const OpInfo& op) {
  const TensorInfo in = ops::InputTensor(m, op, 0), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 0));
  ESPNN_RETURN_IF_ERROR(ops::ExpectSameShape(in, "input", out, "output"));
  const uint32_t width = in.inner(0);
  if (width > kMaxNormWidth)
    return ops::Fail("row length %u exceeds %u (max_norm_width)", (unsigned)width,
                     (unsigned)kMaxNormWidth);
  const TensorInfo mult = ops::InputTensor(m, op, kGammaMult);
  const TensorInfo shift = ops::InputTensor(m, op, kGammaShift);
  ESPNN_RETURN_IF_ERROR(ExpectGammaVector(mult, "gamma_mult", width));
  ESPNN_RETURN_IF_ERROR(
      ops::ExpectConstVector(shift, "gamma_shift", DType::INT32, mult.num_elements()));
  const uint8_t* shifts = m.constant_data(shift);
  for (uint32_t i = 0; i < shift.num_elements(); ++i) {
    const int32_t s = ops::LoadI32(shifts, i);
    if (s < kNormMinGammaShift || s > kNormMaxGammaShift)
      return ops::Fail("gamma_shift[%u] = %d is not in %d..%d", (unsigned)i, (int)s,
                       (int)kNormMinGammaShift, (int)kNormMaxGammaShift);
  }
  const auto p = op.Params<LAYER_NORM_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.rms_norm, "rms_norm", 0, 1));
  const bool has_beta = op.inputs[kBeta] != kNoTensor;
  if (has_beta && p.rms_norm)
    return ops::Fail("beta must be absent for RMS norm (rms_norm = 1)");
  if (has_beta)
    ESPNN_RETURN_IF_ERROR(
        ops::ExpectConstVector(ops::InputTensor(m, op, kBeta), "beta", DType::INT32, width));
  // D = (V << 14) + eps_term must stay below 2^63: V < 2^48, eps_term < 2^62.
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.eps_hi, "eps_hi", 0, (1 << 30) - 1));
  return ops::ExpectActivationRange(p.act_min, p.act_max);
}

// floor(sqrt(v)), digit by digit: exact and the same on every target.
uint32_t IntegerSqrt(uint64_t v) {
  uint64_t rem = v, root = 0, bit = 1ull << 62;
  while (bit > v) bit >>= 2;
  while (bit != 0) {
    if (rem >= root + bit) {
      rem -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
    bit >>= 2;
  }
  return (uint32_t)root;
}

int TopBit(uint64_t v) {
  int p = 0;
  while (v >>= 1) ++p;
  return p;
}

// round(v / 2^k) with ties toward +infinity; k in 1..62, |v| < 2^62.
int64_t RoundShift(int64_t v, int k) { return (v + ((int64_t)1 << (k - 1))) >> k; }

// 1/sqrt(D) ~= mult * 2^(-61 + half_exp): the row's reciprocal standard
// deviation. D is normalised by an even shift e (D_n = D * 2^e, floor when e
// < 0) into [2^60, 2^62), so s = isqrt(D_n) is in [2^30, 2^31) and
// mult = round(2^61 / s) in (2^30, 2^31]; half_exp = e / 2.
struct RowScale {
  uint64_t mult;
  int half_exp;
};

RowScale ReciprocalSqrt(uint64_t d) {
  if (d == 0) return {0, 0};  // only for a constant row: every numerator is 0
  const int e = 2 * ((61 - TopBit(d)) >> 1);  // floor division (61 - p may be -1)
  const uint64_t dn = e >= 0 ? d << e : d >> -e;
  const uint64_t s = IntegerSqrt(dn);
  return {((1ull << 61) + s / 2) / s, e / 2};
}

Status EvalLayerNorm(const OpInfo& op, const EvalContext& ctx) {
  const auto p = op.Params<LAYER_NORM_Params>();
  const TensorInfo in = ctx.tensor(op.inputs[0]), out = ctx.tensor(op.outputs[0]);
  const int8_t* src = (const int8_t*)ctx.in(op.inputs[0]);
  int8_t* dst = (int8_t*)ctx.out(op.outputs[0]);
  const uint8_t* gamma_mult = ctx.in(op.inputs[kGammaMult]);
  const uint8_t* gamma_shift = ctx.in(op.inputs[kGammaShift]);
  const uint8_t* beta = ctx.in(op.inputs[kBeta]);  // nullptr when absent
  const bool per_channel = ctx.tensor(op.inputs[kGammaMult]).num_elements() != 1;
  const uint32_t width = in.inner(0);
  const uint32_t rows = in.num_elements() / width;
  const int32_t in_zp = in.zero_point, out_zp = out.zero_point;
  const uint64_t eps_term = EpsTerm(p);
  constexpr int kBetaHalf = 1 << (kNormBetaFracBits - 1);
  // z in Q22 times a Q31 gamma multiplier is y * 2^(53 - gamma_shift); to Q16.
  constexpr int kProductToBeta = (int)(kNormValueFracBits + 31 - kNormBetaFracBits);

  for (uint32_t r = 0; r < rows; ++r) {
    const int8_t* x = src + (size_t)r * width;
    int8_t* y = dst + (size_t)r * width;
    int32_t s1 = 0;
    uint32_t s2 = 0;  // < 2^32 by kMaxNormWidth
    for (uint32_t j = 0; j < width; ++j) {
      const int32_t d = (int32_t)x[j] - in_zp;
      s1 += d;
      s2 += (uint32_t)(d * d);
    }
    if (p.rms_norm) s1 = 0;
    // N*S2 - S1^2 >= 0 (Cauchy-Schwarz), < 2^48.
    const uint64_t v = (uint64_t)width * s2 - (uint64_t)((int64_t)s1 * s1);
    const RowScale rs = ReciprocalSqrt((v << kNormEpsFracBits) + eps_term);
    // z * 2^22 = n * mult * 2^(7 + half_exp - 61 + 22).
    const int z_shift = 32 - rs.half_exp;  // 2..33
    for (uint32_t j = 0; j < width; ++j) {
      const int32_t n = (int32_t)width * ((int32_t)x[j] - in_zp) - s1;  // |n| < 2^25
      const int64_t z = RoundShift((int64_t)n * (int64_t)rs.mult, z_shift);  // |z| < 2^30
      const uint32_t c = per_channel ? j : 0;
      const int64_t g = ops::LoadI32(gamma_mult, c);
      const int shift = kProductToBeta - ops::LoadI32(gamma_shift, c);  // 7..61
      int64_t acc = RoundShift(z * g, shift);
      if (beta != nullptr) acc += ops::LoadI32(beta, j);
      const int64_t q = ((acc + kBetaHalf) >> kNormBetaFracBits) + out_zp;
      y[j] = (int8_t)(q < p.act_min ? p.act_min : (q > p.act_max ? p.act_max : q));
    }
  }
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
ESPNN_S3_SCALAR_ROUTE(kLayerNormS3Rule, "interpreter layer norm",
                      "§1.4: ESP-NN has no normalisation function; the interpreter computes it in integer C "
                      "(two passes per row)");
#endif

}  // namespace

extern const OpKernel kLayerNormKernel = {ValidateLayerNorm, nullptr, EvalLayerNorm ESPNN_S3_ROUTE(kLayerNormS3Rule)};

}  // namespace espnn
