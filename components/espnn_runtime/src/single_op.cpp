// RunSingleOp (espnn/single_op.h): one op as a one-op XTS3 program.
//
// The program is written with the format constants of xts3_format.h and then
// handed to the same ParseModel / Interpreter the delegate uses, so a call
// the parser would refuse in a delegated program is refused here with the
// same message.
#include "espnn/single_op.h"

#include <stdlib.h>
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

// One 16-byte aligned block from malloc (the platform's, on every target),
// freed when it goes out of scope.
class AlignedBlock {
 public:
  explicit AlignedBlock(size_t bytes) : raw_(bytes ? malloc(bytes + 15) : nullptr) {}
  ~AlignedBlock() { free(raw_); }
  AlignedBlock(const AlignedBlock&) = delete;
  AlignedBlock& operator=(const AlignedBlock&) = delete;
  uint8_t* get() const {
    return raw_ ? (uint8_t*)(((uintptr_t)raw_ + 15) & ~(uintptr_t)15) : nullptr;
  }

 private:
  void* raw_;
};

// The tensors of the program: inputs (absent optional ones get kNoTensor),
// then outputs, in call order.
struct Layout {
  uint16_t index[kMaxOpInputs + kMaxOpOutputs];
  uint32_t offset[kMaxOpInputs + kMaxOpOutputs];  // arena or constants offset
  uint16_t graph_inputs[kMaxOpInputs];  // the activations among the inputs
  uint32_t num_graph_inputs = 0;
  uint32_t num_tensors = 0, arena_bytes = 0, constant_bytes = 0;
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
    uint32_t& cursor = t.constant ? l->constant_bytes : l->arena_bytes;
    // The sum of the call's tensors must stay a valid XTS3 size (no 32-bit wrap).
    if ((uint64_t)cursor + n + 2 * kArenaAlignment > kMaxArenaBytes)
      return Status::Error(StatusCode::kInvalidArgument, "the call's tensors exceed %u bytes",
                           (unsigned)kMaxArenaBytes);
    cursor = Align(cursor, t.constant ? kConstantAlignment : kArenaAlignment);
    l->offset[i] = cursor;
    cursor += (uint32_t)n;
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
    s.bytes[k] = constants ? l.constant_bytes : s.count[k] * record[k];
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
  uint8_t* constants = sec[(uint32_t)Section::CONSTANTS - 1];
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
    if (t.constant) memcpy(constants + l.offset[i], t.data, TensorBytes(t));
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

// The call's program, written and parsed: what both entry points start from.
class Program {
 public:
  Status Prepare(const SingleOpCall& c) {
    ESPNN_RETURN_IF_ERROR(PlanLayout(c, &layout_));
    const Sections s = SectionLayout(c, layout_);
    blob_ = new AlignedBlock(s.total);
    if (blob_->get() == nullptr)
      return Status::Error(StatusCode::kInvalidArgument, "out of memory for a %u-byte program",
                           (unsigned)s.total);
    WriteProgram(c, layout_, s, blob_->get());
    return ParseModel(blob_->get(), s.total, &model_);
  }
  ~Program() { delete blob_; }
  const Layout& layout() const { return layout_; }
  const Model& model() const { return model_; }

 private:
  Layout layout_;
  AlignedBlock* blob_ = nullptr;
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
  const Layout& l = p.layout();
  const MemoryRequirements need = ComputeMemoryRequirements(p.model());
  AlignedBlock arena(l.arena_bytes), own_scratch(c.scratch ? 0 : need.scratch_bytes);
  if (l.arena_bytes && arena.get() == nullptr)
    return Status::Error(StatusCode::kInvalidArgument, "out of memory for a %u-byte arena",
                         (unsigned)l.arena_bytes);
  void* scratch = c.scratch ? c.scratch : own_scratch.get();
  const size_t scratch_bytes = c.scratch ? c.scratch_bytes : need.scratch_bytes;
  if (need.scratch_bytes && scratch == nullptr)
    return Status::Error(StatusCode::kInvalidArgument, "out of memory for %u scratch bytes",
                         (unsigned)need.scratch_bytes);
  Interpreter interp;
  ESPNN_RETURN_IF_ERROR(interp.Init(&p.model(), arena.get(), l.arena_bytes, scratch, scratch_bytes));
  for (uint32_t i = 0; i < c.num_inputs; ++i)
    if (l.index[i] != kNoTensor && !c.inputs[i].constant)
      memcpy(arena.get() + l.offset[i], c.inputs[i].data, TensorBytes(c.inputs[i]));
  ESPNN_RETURN_IF_ERROR(interp.Invoke());
  for (uint32_t o = 0; o < c.num_outputs; ++o)
    memcpy(c.outputs[o].data, arena.get() + l.offset[c.num_inputs + o], TensorBytes(c.outputs[o]));
  return Status::Ok();
}

}  // namespace espnn
