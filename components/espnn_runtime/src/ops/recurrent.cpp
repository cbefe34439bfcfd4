// GRU and LSTM: one layer of nn.GRU / nn.LSTM over a whole int8 sequence, in
// integer arithmetic only, so x86-64, -m32 and Xtensa give the same bytes.
//
// The op loops over the time steps itself: the payload holds one record and
// one set of weights whatever the sequence length, and the state lives in
// scratch, not in the arena. docs/xts3-format.md, GRU and LSTM, is the
// reference for every formula; in short, per batch element and time step t:
//
//   gx = Q3.12(W_ih (x_t - x_zp) + b_ih)      per gate row: MBQM, saturate int16
//   gh = Q3.12(W_hh (y_{t-1} - y_zp) + b_hh)  0 + b_hh at t = 0 (zero state)
//   GRU:  r = sig(gx_r + gh_r)   z = sig(gx_z + gh_z)
//         n = tanh(gx_n + r * gh_n)           h = (1 - z) * n + z * h
//   LSTM: i, f, o = sig(gx + gh)   g = tanh(gx_g + gh_g)
//         c = f * c + i * g (Q4.11)           h = o * tanh(c)
//   y_t = clamp(MBQM(h, state_mult, state_shift) + y_zp)
//
// The output is the whole sequence, or (a time dim of 1) its last step only,
// which is what a classifier on y[:, -1] reads: then the arena holds one step.
//
// h is kept in Q0.15 between steps (int16: an int8 state would lose a
// rounding step per time step, which adds up over a sequence, as TFLite
// Micro's integer LSTM keeps its cell in int16 for the same reason); what
// W_hh reads is the int8 y_{t-1}, the value the model's output has.
//
// ESP-NN's fully-connected kernel writes int8 only, but the gates need their
// pre-activations at int16 precision, so the gate products are int32 dot
// products here (C, no SIMD).
#include "ops/op_util.h"
#include "ops/s3_route.h"

namespace espnn {
namespace {

using namespace xts3;

constexpr uint32_t kIn = 0, kWih = 1, kWhh = 2, kBih = 3, kBhh = 4, kMultIh = 5, kShiftIh = 6,
                   kMultHh = 7, kShiftHh = 8, kSigmoid = 9, kTanh = 10;
constexpr int32_t kQ15One = 1 << kRecurrentStateFracBits;  // 32768
constexpr int32_t kTableMax = kQ15One - 1;
// GRU and LSTM have the same parameter words (xts3_format.h).
static_assert(sizeof(GRU_Params) == sizeof(LSTM_Params) && kNumParams_GRU == kNumParams_LSTM,
              "GRU and LSTM share one parameter layout");

// Sequence geometry read from the input and output records.
struct Geometry {
  uint32_t batch, steps, in_size, hidden;
  bool batch_first;
  // Offset (in elements / feature size) of element (b, t) of a sequence.
  uint32_t row(uint32_t b, uint32_t t) const {
    return batch_first ? b * steps + t : t * batch + b;
  }
};

Geometry GeometryOf(const TensorInfo& in, const TensorInfo& out, int32_t batch_first) {
  Geometry g;
  g.batch_first = batch_first != 0;
  g.batch = g.batch_first ? in.dims[0] : in.dims[1];
  g.steps = g.batch_first ? in.dims[1] : in.dims[0];
  g.in_size = in.dims[2];
  g.hidden = out.dims[2];
  return g;
}

Status ExpectShifts(const Model& m, const TensorInfo& t, const char* what) {
  const uint8_t* data = m.constant_data(t);
  for (uint32_t i = 0; i < t.num_elements(); ++i) {
    const int32_t s = ops::LoadI32(data, i);
    if (s < -31 || s > 30)
      return ops::Fail("%s[%u] = %d is not in -31..30", what, (unsigned)i, (int)s);
  }
  return Status::Ok();
}

Status ExpectTable(const Model& m, const TensorInfo& t, const char* what, int32_t lo) {
  ESPNN_RETURN_IF_ERROR(ops::ExpectConstVector(t, what, DType::INT32, kRecurrentTableEntries));
  const uint8_t* data = m.constant_data(t);
  for (uint32_t i = 0; i < kRecurrentTableEntries; ++i) {
    const int32_t v = ops::LoadI32(data, i);
    if (v < lo || v > kTableMax)
      return ops::Fail("%s[%u] = %d is not in %d..%d", what, (unsigned)i, (int)v, (int)lo,
                       (int)kTableMax);
  }
  return Status::Ok();
}

Status ValidateRecurrent(const Model& m, const OpInfo& op, uint32_t gates) {
  const TensorInfo in = ops::InputTensor(m, op, kIn), out = ops::OutputTensor(m, op, 0);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(in, "input", DType::INT8, 3));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(out, "output", DType::INT8, 3));
  const auto p = op.Params<GRU_Params>();
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.batch_first, "batch_first", 0, 1));
  const Geometry g = GeometryOf(in, out, p.batch_first);
  // The whole output sequence, or (a time dim of 1) its last step alone.
  const uint32_t out_batch = g.batch_first ? out.dims[0] : out.dims[1];
  const uint32_t out_steps = g.batch_first ? out.dims[1] : out.dims[0];
  if (out_batch != g.batch || (out_steps != g.steps && out_steps != 1))
    return ops::Fail("output [%u, %u, H] does not match the input's [%u, %u, I] (or its last step)",
                     (unsigned)out.dims[0], (unsigned)out.dims[1], (unsigned)in.dims[0],
                     (unsigned)in.dims[1]);
  if (g.hidden > kMaxKernelDim / gates || g.in_size > kMaxKernelDim)
    return ops::Fail("hidden size %u or input size %u too large", (unsigned)g.hidden,
                     (unsigned)g.in_size);
  const uint32_t rows = gates * g.hidden;
  const TensorInfo wih = ops::InputTensor(m, op, kWih), whh = ops::InputTensor(m, op, kWhh);
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(wih, "w_ih", DType::INT8, 2));
  ESPNN_RETURN_IF_ERROR(ops::ExpectTensor(whh, "w_hh", DType::INT8, 2));
  if (wih.memory != Memory::CONSTANT || whh.memory != Memory::CONSTANT)
    return ops::Fail("w_ih and w_hh must be constants");
  if (wih.dims[0] != rows || wih.dims[1] != g.in_size)
    return ops::Fail("w_ih is [%u, %u], expected [%u, %u]", (unsigned)wih.dims[0],
                     (unsigned)wih.dims[1], (unsigned)rows, (unsigned)g.in_size);
  if (whh.dims[0] != rows || whh.dims[1] != g.hidden)
    return ops::Fail("w_hh is [%u, %u], expected [%u, %u]", (unsigned)whh.dims[0],
                     (unsigned)whh.dims[1], (unsigned)rows, (unsigned)g.hidden);
  const char* names[] = {"bias_ih", "bias_hh", "mult_ih", "shift_ih", "mult_hh", "shift_hh"};
  for (uint32_t k = 0; k < 6; ++k)
    ESPNN_RETURN_IF_ERROR(
        ops::ExpectConstVector(ops::InputTensor(m, op, kBih + k), names[k], DType::INT32, rows));
  ESPNN_RETURN_IF_ERROR(ExpectShifts(m, ops::InputTensor(m, op, kShiftIh), "shift_ih"));
  ESPNN_RETURN_IF_ERROR(ExpectShifts(m, ops::InputTensor(m, op, kShiftHh), "shift_hh"));
  // The gate sums W (v + offset) + bias stay in int32 (GatePreactivations):
  // w_ih reads the input (offset -input zero point), w_hh the int8 hidden
  // state, which is the output tensor's quantization.
  const auto c = [&](uint32_t slot) { return m.constant_data(ops::InputTensor(m, op, slot)); };
  ESPNN_RETURN_IF_ERROR(ops::CheckAccumulatorRows((const int8_t*)c(kWih), c(kBih), c(kShiftIh), rows,
                                                  g.in_size, g.in_size, 1, -in.zero_point, "w_ih row"));
  ESPNN_RETURN_IF_ERROR(ops::CheckAccumulatorRows((const int8_t*)c(kWhh), c(kBhh), c(kShiftHh), rows,
                                                  g.hidden, g.hidden, 1, -out.zero_point, "w_hh row"));
  // sigmoid(x) >= 0 keeps 1 - z and the products below in range.
  ESPNN_RETURN_IF_ERROR(ExpectTable(m, ops::InputTensor(m, op, kSigmoid), "sigmoid table", 0));
  ESPNN_RETURN_IF_ERROR(ExpectTable(m, ops::InputTensor(m, op, kTanh), "tanh table", -kTableMax));
  ESPNN_RETURN_IF_ERROR(ops::ExpectRange(p.state_shift, "state_shift", -31, 30));
  return ops::ExpectRange(p.state_mult, "state_mult", 0, INT32_MAX);
}

Status ValidateGru(const Model& m, const OpInfo& op) { return ValidateRecurrent(m, op, 3); }
Status ValidateLstm(const Model& m, const OpInfo& op) { return ValidateRecurrent(m, op, 4); }

// Scratch: the two gate pre-activation vectors and the int16 state (h, and
// the cell for LSTM), then the int8 hidden state w_hh reads (the output step
// just written; kept here so that an op that writes only the last step needs
// no arena per step).
uint32_t ScratchOf(const Model& m, const OpInfo& op, uint32_t gates, uint32_t states) {
  const uint32_t h = ops::OutputTensor(m, op, 0).dims[2];
  return (2 * gates + states) * h * (uint32_t)sizeof(int16_t) + h;
}
uint32_t GruScratch(const Model& m, const OpInfo& op) { return ScratchOf(m, op, 3, 1); }
uint32_t LstmScratch(const Model& m, const OpInfo& op) { return ScratchOf(m, op, 4, 2); }

int16_t Sat16(int32_t v) { return (int16_t)ops::Clamp(v, INT16_MIN, INT16_MAX); }

// round(v / 2^k), ties toward +infinity (add half, arithmetic shift).
int32_t RoundShift(int32_t v, int k) { return (v + (1 << (k - 1))) >> k; }

// A Q3.12 value through a table sampled every 2^kRecurrentTableStepBits,
// linear in between: the table's Q0.15 value.
int32_t Table(const uint8_t* table, int16_t x) {
  const uint32_t u = (uint32_t)((int32_t)x + 32768);
  const uint32_t k = u >> kRecurrentTableStepBits;
  const int32_t frac = (int32_t)(u & ((1u << kRecurrentTableStepBits) - 1));
  const int32_t lo = ops::LoadI32(table, k), hi = ops::LoadI32(table, k + 1);
  return lo + RoundShift((hi - lo) * frac, kRecurrentTableStepBits);
}

// Q3.12 pre-activations of every gate row: W (v + offset) + bias,
// requantized per row; v == nullptr is the zero state (bias alone).
void GatePreactivations(const int8_t* w, const uint8_t* bias, const uint8_t* mult,
                        const uint8_t* shift, const int8_t* v, int32_t offset, uint32_t rows,
                        uint32_t cols, int16_t* out) {
  for (uint32_t r = 0; r < rows; ++r) {
    int32_t acc = ops::LoadI32(bias, r);
    if (v != nullptr) {
      const int8_t* wr = w + (size_t)r * cols;
      for (uint32_t k = 0; k < cols; ++k) acc += (int32_t)wr[k] * ((int32_t)v[k] + offset);
    }
    out[r] = Sat16(ops::MBQM(acc, ops::LoadI32(mult, r), ops::LoadI32(shift, r)));
  }
}

template <bool kLstm>
Status EvalRecurrent(const OpInfo& op, const EvalContext& ctx) {
  constexpr uint32_t kGates = kLstm ? 4 : 3;
  const auto p = op.Params<GRU_Params>();
  const TensorInfo in = ctx.tensor(op.inputs[kIn]), out = ctx.tensor(op.outputs[0]);
  const Geometry g = GeometryOf(in, out, p.batch_first);
  const int8_t* x = (const int8_t*)ctx.in(op.inputs[kIn]);
  int8_t* y = (int8_t*)ctx.out(op.outputs[0]);
  const int8_t* wih = (const int8_t*)ctx.in(op.inputs[kWih]);
  const int8_t* whh = (const int8_t*)ctx.in(op.inputs[kWhh]);
  const uint8_t *bih = ctx.in(op.inputs[kBih]), *bhh = ctx.in(op.inputs[kBhh]);
  const uint8_t *mih = ctx.in(op.inputs[kMultIh]), *sih = ctx.in(op.inputs[kShiftIh]);
  const uint8_t *mhh = ctx.in(op.inputs[kMultHh]), *shh = ctx.in(op.inputs[kShiftHh]);
  const uint8_t *sig = ctx.in(op.inputs[kSigmoid]), *tanh = ctx.in(op.inputs[kTanh]);
  const uint32_t H = g.hidden, rows = kGates * H;
  int16_t* gx = (int16_t*)ctx.scratch;
  int16_t* gh = gx + rows;
  int16_t* h = gh + rows;
  int16_t* c = h + H;  // LSTM only
  int8_t* h8 = (int8_t*)(c + (kLstm ? H : 0));
  const bool whole_sequence = (g.batch_first ? out.dims[1] : out.dims[0]) == g.steps;
  const int32_t x_offset = -in.zero_point, y_zp = out.zero_point, y_offset = -out.zero_point;

  for (uint32_t b = 0; b < g.batch; ++b) {
    for (uint32_t j = 0; j < H; ++j) h[j] = 0;
    if (kLstm)
      for (uint32_t j = 0; j < H; ++j) c[j] = 0;
    for (uint32_t t = 0; t < g.steps; ++t) {
      const int8_t* xt = x + (size_t)g.row(b, t) * g.in_size;
      const int8_t* prev = t == 0 ? nullptr : h8;
      GatePreactivations(wih, bih, mih, sih, xt, x_offset, rows, g.in_size, gx);
      GatePreactivations(whh, bhh, mhh, shh, prev, y_offset, rows, H, gh);
      for (uint32_t j = 0; j < H; ++j) {
        int32_t hj;
        if (kLstm) {
          const int32_t ig = Table(sig, Sat16(gx[j] + gh[j]));
          const int32_t fg = Table(sig, Sat16(gx[H + j] + gh[H + j]));
          const int32_t gg = Table(tanh, Sat16(gx[2 * H + j] + gh[2 * H + j]));
          const int32_t og = Table(sig, Sat16(gx[3 * H + j] + gh[3 * H + j]));
          // f * c: Q0.15 * Q4.11 -> Q4.11; i * g: Q0.30 -> Q4.11.
          constexpr int kProductToCell =
              2 * kRecurrentStateFracBits - kRecurrentCellFracBits;  // 19
          const int16_t cj = Sat16(RoundShift(fg * c[j], kRecurrentStateFracBits) +
                                   RoundShift(ig * gg, kProductToCell));
          c[j] = cj;
          // Q4.11 -> Q3.12 for the tanh table (saturates beyond +-8, where tanh is +-1).
          const int32_t tc = Table(tanh, Sat16((int32_t)cj * 2));
          hj = RoundShift(og * tc, kRecurrentStateFracBits);
        } else {
          const int32_t rg = Table(sig, Sat16(gx[j] + gh[j]));
          const int32_t zg = Table(sig, Sat16(gx[H + j] + gh[H + j]));
          const int32_t n =
              Table(tanh, Sat16(gx[2 * H + j] + RoundShift(rg * gh[2 * H + j], kRecurrentStateFracBits)));
          // (1 - z) n + z h: both products <= 2^15 * (2^15 - 1), the sum < 2^31.
          hj = RoundShift((kQ15One - zg) * n + zg * h[j], kRecurrentStateFracBits);
        }
        h[j] = (int16_t)hj;
        // gh is complete, so h8 (this step's w_hh input) may be overwritten now.
        h8[j] = (int8_t)ops::Clamp(ops::MBQM(hj, p.state_mult, p.state_shift) + y_zp, -128, 127);
      }
      // The last-step form has one output row per sequence: row b in either layout.
      if (whole_sequence)
        memcpy(y + (size_t)g.row(b, t) * H, h8, H);
      else if (t + 1 == g.steps)
        memcpy(y + (size_t)b * H, h8, H);
    }
  }
  return Status::Ok();
}

#ifdef ESPNN_DESCRIBE_S3_ROUTES
// The gates' dot products are the interpreter's own.
constexpr const char* kRecurrentS3Doc =
    "§1.4: ESP-NN's FC writes int8 only and the gates need int16 "
    "pre-activations: the interpreter's int32 dot products (C)";
ESPNN_S3_SCALAR_ROUTE(kGruS3Rule, "interpreter GRU", kRecurrentS3Doc);
ESPNN_S3_SCALAR_ROUTE(kLstmS3Rule, "interpreter LSTM", kRecurrentS3Doc);
#endif

}  // namespace

extern const OpKernel kGruKernel = {ValidateGru, GruScratch, EvalRecurrent<false> ESPNN_S3_ROUTE(kGruS3Rule)};
extern const OpKernel kLstmKernel = {ValidateLstm, LstmScratch, EvalRecurrent<true> ESPNN_S3_ROUTE(kLstmS3Rule)};

}  // namespace espnn
