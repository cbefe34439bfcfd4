// RunSingleOp (espnn/single_op.h): one op as a one-op XTS3 program.
//
// The program is written with the format constants of xts3_format.h and then
// handed to the same ParseModel / Interpreter the delegate uses, so a call
// the parser would refuse in a delegated program is refused here with the
// same message. It holds records only: ParseModel's tensor_data points every
// tensor at the caller's bytes, so nothing is copied and nothing allocated
// (the blob is on the stack; the scratch is the caller's).
#include "espnn/single_op.h"

#include <string.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "ops/op_kernel.h"

namespace espnn {
namespace {

using namespace xts3;

uint32_t Align(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }
void PutU16(uint8_t* p, uint16_t v) { memcpy(p, &v, 2); }  // little-endian target (parser.cpp)
void PutU32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }

uint64_t TensorBytes(const SingleOpTensor& t) {
  uint64_t n = DTypeSize(t.dtype);
  for (uint32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

// The tensors of the program: inputs (absent optional ones get kNoTensor),
// then outputs, in call order.
struct Layout {
  uint16_t index[kMaxOpInputs + kMaxOpOutputs];
  uint32_t offset[kMaxOpInputs + kMaxOpOutputs];  // arena or constants offset
  uint16_t graph_inputs[kMaxOpInputs];  // the activations among the inputs
  void* data[kMaxOpInputs + kMaxOpOutputs];  // by tensor index: the caller's bytes
  uint32_t num_graph_inputs = 0;
  uint32_t num_tensors = 0, arena_bytes = 0;  // arena_bytes: the virtual arena's
};

Status PlanLayout(const SingleOpCall& c, Layout* l) {
  if (c.num_inputs > kMaxOpInputs || c.num_outputs > kMaxOpOutputs || c.num_outputs == 0)
    return Status::Error(StatusCode::kInvalidArgument, "%u inputs / %u outputs",
                         (unsigned)c.num_inputs, (unsigned)c.num_outputs);
  for (uint32_t i = 0; i < c.num_inputs + c.num_outputs; ++i) {
    const bool is_input = i < c.num_inputs;
    const SingleOpTensor& t = is_input ? c.inputs[i] : c.outputs[i - c.num_inputs];
    if (is_input && t.data == nullptr) {
      l->index[i] = kNoTensor;
      continue;
    }
    if (t.data == nullptr || t.rank == 0 || t.rank > kMaxRank || DTypeSize(t.dtype) == 0 ||
        (!is_input && t.constant))
      return Status::Error(StatusCode::kInvalidArgument, "%s %u: no data, bad rank or dtype",
                           is_input ? "input" : "output", (unsigned)(is_input ? i : i - c.num_inputs));
    const uint64_t n = TensorBytes(t);
    if (n > kMaxTensorBytes)
      return Status::Error(StatusCode::kInvalidArgument, "tensor of %llu bytes", (unsigned long long)n);
    // Activations get disjoint offsets in a virtual arena, so the parser's
    // and the ops' aliasing checks see what ExecuTorch guarantees (an op's
    // tensors do not overlap); the bytes stay where the caller has them.
    // Constants are read in place: their records' offsets are 0.
    if (t.constant) {
      l->offset[i] = 0;
    } else {
      // The sum of the call's tensors must stay a valid XTS3 size (no 32-bit wrap).
      if ((uint64_t)l->arena_bytes + n + 2 * kArenaAlignment > kMaxArenaBytes)
        return Status::Error(StatusCode::kInvalidArgument, "the call's tensors exceed %u bytes",
                             (unsigned)kMaxArenaBytes);
      l->arena_bytes = Align(l->arena_bytes, kArenaAlignment);
      l->offset[i] = l->arena_bytes;
      l->arena_bytes += (uint32_t)n;
    }
    l->data[l->num_tensors] = t.data;
    l->index[i] = (uint16_t)l->num_tensors++;
    if (is_input && !t.constant) l->graph_inputs[l->num_graph_inputs++] = l->index[i];
  }
  l->arena_bytes = Align(l->arena_bytes, kArenaAlignment);
  return Status::Ok();
}

// Where each section goes (in kind order, after the header and table).
struct Sections {
  uint32_t offset[kNumSectionKinds], bytes[kNumSectionKinds], count[kNumSectionKinds];
  uint32_t total;
};

Sections SectionLayout(const SingleOpCall& c, const Layout& l) {
  Sections s;
  const uint32_t io = c.num_inputs + c.num_outputs;
  const uint32_t counts[kNumSectionKinds] = {l.num_tensors, 1, io, c.num_params, 0, l.num_graph_inputs,
                                             (uint32_t)c.num_outputs};
  const uint32_t record[kNumSectionKinds] = {kTensorRecordSize, kOpRecordSize, 2, 4, 0, 2, 2};
  uint32_t cursor = kHeaderSize + kNumSectionKinds * kSectionEntrySize;
  for (uint32_t k = 0; k < kNumSectionKinds; ++k) {
    const bool constants = k + 1 == (uint32_t)Section::CONSTANTS;
    cursor = Align(cursor, constants ? kConstantAlignment : 4u);
    s.offset[k] = cursor;
    s.count[k] = constants ? 0 : counts[k];
    s.bytes[k] = constants ? 0 : s.count[k] * record[k];  // constants stay the caller's
    cursor += s.bytes[k];
  }
  s.total = Align(cursor, kBlobAlignment);
  return s;
}

void WriteProgram(const SingleOpCall& c, const Layout& l, const Sections& s, uint8_t* blob) {
  memset(blob, 0, s.total);

  PutU32(blob + kHdrMagic, kMagic);
  PutU16(blob + kHdrVersion, kFormatVersion);
  PutU16(blob + kHdrHeaderSize, (uint16_t)kHeaderSize);
  PutU32(blob + kHdrBlobSize, s.total);
  PutU32(blob + kHdrArenaSize, l.arena_bytes);
  PutU32(blob + kHdrSectionCount, kNumSectionKinds);
  PutU32(blob + kHdrSectionTable, kHeaderSize);
  for (uint32_t k = 0; k < kNumSectionKinds; ++k) {
    uint8_t* e = blob + kHeaderSize + k * kSectionEntrySize;
    PutU32(e, k + 1);
    PutU32(e + 4, s.offset[k]);
    PutU32(e + 8, s.bytes[k]);
    PutU32(e + 12, s.count[k]);
  }
  uint8_t* sec[kNumSectionKinds];
  for (uint32_t k = 0; k < kNumSectionKinds; ++k) sec[k] = blob + s.offset[k];
  uint8_t* tensors = sec[(uint32_t)Section::TENSORS - 1];
  for (uint32_t i = 0; i < c.num_inputs + c.num_outputs; ++i) {
    PutU16(sec[(uint32_t)Section::OP_IO - 1] + 2 * i, l.index[i]);
    if (l.index[i] == kNoTensor) continue;
    const SingleOpTensor& t = i < c.num_inputs ? c.inputs[i] : c.outputs[i - c.num_inputs];
    uint8_t* r = tensors + l.index[i] * kTensorRecordSize;
    r[kTenDtype] = (uint8_t)t.dtype;
    r[kTenRank] = t.rank;
    r[kTenMemory] = (uint8_t)(t.constant ? Memory::CONSTANT : Memory::ARENA);
    PutU32(r + kTenOffset, l.offset[i]);
    PutU32(r + kTenNbytes, (uint32_t)TensorBytes(t));
    int32_t zero_point = t.zero_point;
    float scale = t.scale;
    if (i >= c.num_inputs && (c.opcode == Opcode::SOFTMAX || c.opcode == Opcode::MASKED_SOFTMAX)) {
      // The format fixes a softmax's output quantization, which the caller's
      // tensor (an ExecuTorch int8 tensor) does not carry.
      zero_point = kSoftmaxOutZeroPoint;
      scale = kSoftmaxOutScale;
    }
    PutU32(r + kTenZeroPoint, (uint32_t)zero_point);
    memcpy(r + kTenScale, &scale, 4);
    for (uint32_t d = 0; d < t.rank; ++d) PutU32(r + kTenDims + 4 * d, t.dims[d]);
  }
  uint8_t* op = sec[(uint32_t)Section::OPS - 1];
  PutU16(op + kOpOpcode, (uint16_t)c.opcode);
  op[kOpNumInputs] = (uint8_t)c.num_inputs;
  op[kOpNumOutputs] = (uint8_t)c.num_outputs;
  PutU32(op + kOpIoStart, 0);
  PutU32(op + kOpParamsStart, 0);
  PutU32(op + kOpParamsCount, c.num_params);
  memcpy(sec[(uint32_t)Section::PARAMS - 1], c.params, 4u * c.num_params);
  for (uint32_t o = 0; o < c.num_outputs; ++o)
    PutU16(sec[(uint32_t)Section::OUTPUTS - 1] + 2 * o, l.index[c.num_inputs + o]);
  for (uint32_t i = 0; i < l.num_graph_inputs; ++i)
    PutU16(sec[(uint32_t)Section::INPUTS - 1] + 2 * i, l.graph_inputs[i]);
}

// The largest program a call can need: every record at its bound (inputs,
// outputs, parameter words), plus the alignment padding of each section.
constexpr uint32_t kMaxCallTensors = kMaxOpInputs + kMaxOpOutputs;
constexpr uint32_t kMaxCallParams = 64;
constexpr uint32_t kMaxProgramBytes = kHeaderSize + kNumSectionKinds * kSectionEntrySize +
                                      kMaxCallTensors * kTensorRecordSize + kOpRecordSize +
                                      3 * 2 * kMaxCallTensors + 4 * kMaxCallParams +
                                      kNumSectionKinds * kConstantAlignment + kBlobAlignment;

// The call's program, written and parsed: what both entry points start from.
// About 2 KB, on the caller's stack.
class Program {
 public:
  Status Prepare(const SingleOpCall& c) {
    if (c.num_params > kMaxCallParams)
      return Status::Error(StatusCode::kInvalidArgument, "%u parameter words; a call takes at most %u",
                           (unsigned)c.num_params, (unsigned)kMaxCallParams);
    ESPNN_RETURN_IF_ERROR(PlanLayout(c, &layout_));
    const Sections s = SectionLayout(c, layout_);
    if (s.total > sizeof(blob_))  // not reachable with the bounds above; kept as the invariant
      return Status::Error(StatusCode::kInvalidArgument, "a %u-byte program", (unsigned)s.total);
    WriteProgram(c, layout_, s, blob_);
    return ParseModel(blob_, s.total, &model_, layout_.data);
  }
  const Model& model() const { return model_; }

 private:
  Layout layout_;
  alignas(16) uint8_t blob_[kMaxProgramBytes];
  Model model_;
};

}  // namespace

bool OpcodeHasScratch(Opcode opcode) {
  const OpKernel* k = LookupOpKernel(opcode);
  return k != nullptr && k->scratch_bytes != nullptr;
}

Status SingleOpScratchBytes(const SingleOpCall& c, uint32_t* bytes) {
  Program p;
  ESPNN_RETURN_IF_ERROR(p.Prepare(c));
  *bytes = ComputeMemoryRequirements(p.model()).scratch_bytes;
  return Status::Ok();
}

Status RunSingleOp(const SingleOpCall& c) {
  Program p;
  ESPNN_RETURN_IF_ERROR(p.Prepare(c));
  const MemoryRequirements need = ComputeMemoryRequirements(p.model());
  void* scratch = c.scratch;
  uint32_t scratch_bytes = c.scratch ? c.scratch_bytes : 0;
  if (need.scratch_bytes > scratch_bytes) {
    scratch = c.more_scratch ? c.more_scratch(c.more_scratch_user, need.scratch_bytes) : nullptr;
    if (scratch == nullptr)
      return Status::Error(StatusCode::kInvalidArgument,
                           "the op needs %u scratch bytes, the call has %u (plan them: SingleOpScratchBytes)",
                           (unsigned)need.scratch_bytes, (unsigned)scratch_bytes);
    scratch_bytes = need.scratch_bytes;
  }
  Interpreter interp;
  ESPNN_RETURN_IF_ERROR(interp.Init(&p.model(), nullptr, 0, scratch, scratch_bytes));
  return interp.Invoke();
}

}  // namespace espnn
