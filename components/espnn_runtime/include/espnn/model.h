// A parsed XTS3 blob: a validated, read-only view over the caller's bytes.
//
// ParseModel checks every region, record, offset, size, count, dimension and
// op parameter before it returns ok; everything a Model hands out afterwards
// can be trusted by the interpreter. Parsing allocates nothing: the Model
// only points into the caller's buffer, which must outlive it.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "espnn/status.h"
#include "espnn/xts3_format.h"

namespace espnn {

struct TensorInfo {
  xts3::DType dtype;
  uint8_t rank;
  xts3::Memory memory;
  uint8_t flags;    // xts3::kTensorFlag* (BANDED: nbytes holds a band buffer, see xts3_format.h)
  uint32_t offset;  // arena offset or offset inside the CONSTANTS section
  uint32_t nbytes;
  int32_t zero_point;
  float scale;
  uint32_t dims[xts3::kMaxRank];  // dims[rank..] are 0
  uint16_t index;  // the tensor's position in the TENSORS section (Model::tensor sets it)

  uint32_t num_elements() const;
  // Dimension counted from the end: inner(0) is the last dimension.
  uint32_t inner(uint32_t k) const { return k < rank ? dims[rank - 1 - k] : 1; }
  bool same_shape(const TensorInfo& o) const;
};

struct OpInfo {
  uint32_t index;  // position in the execution order
  xts3::Opcode opcode;
  uint8_t num_inputs;
  uint8_t num_outputs;
  uint16_t inputs[xts3::kMaxOpInputs];    // xts3::kNoTensor for an absent optional input
  uint16_t outputs[xts3::kMaxOpOutputs];
  const uint8_t* params;  // params_count little-endian int32 words
  uint32_t params_count;
  uint32_t debug_handle;

  // Copies the parameter words into the opcode's params struct. The parser
  // has checked that params_count matches the struct's field count.
  template <typename P>
  P Params() const {
    static_assert(sizeof(P) % 4 == 0, "params structs hold int32 words");
    P p;
    memset(&p, 0, sizeof(p));
    size_t n = params_count * 4u < sizeof(P) ? params_count * 4u : sizeof(P);
    memcpy(&p, params, n);  // little-endian target (checked in parser.cpp)
    return p;
  }
};

class Model {
 public:
  Model() = default;

  uint16_t version() const { return version_; }
  uint32_t arena_size() const { return arena_size_; }
  const uint8_t* data() const { return base_; }
  uint32_t size() const { return size_; }

  uint32_t num_tensors() const { return count_[kTensors]; }
  uint32_t num_ops() const { return count_[kOps]; }
  uint32_t num_inputs() const { return count_[kInputs]; }
  uint32_t num_outputs() const { return count_[kOutputs]; }

  TensorInfo tensor(uint32_t index) const;  // index < num_tensors()
  OpInfo op(uint32_t index) const;          // index < num_ops()
  uint16_t input(uint32_t i) const { return ReadU16At(kInputs, i); }
  uint16_t output(uint32_t i) const { return ReadU16At(kOutputs, i); }
  // Bytes of a CONSTANT tensor (nullptr for an arena tensor).
  const uint8_t* constant_data(const TensorInfo& t) const;
  // A program parsed with `tensor_data` (ParseModel) reads and writes every
  // tensor at the caller's address instead of the arena or the CONSTANTS
  // section: tensor_bytes(i) is that address, nullptr for other programs.
  uint8_t* tensor_bytes(uint32_t index) const {
    return tensor_data_ ? (uint8_t*)tensor_data_[index] : nullptr;
  }
  bool caller_tensors() const { return tensor_data_ != nullptr; }

 private:
  friend Status ParseModel(const void* data, size_t size, Model* out, void* const* tensor_data);
  enum SectionSlot { kTensors, kOps, kOpIo, kParams, kConstants, kInputs, kOutputs, kNumSlots };
  uint16_t ReadU16At(SectionSlot s, uint32_t i) const;

  const uint8_t* base_ = nullptr;
  uint32_t size_ = 0;
  uint16_t version_ = 0;
  uint32_t arena_size_ = 0;
  const uint8_t* section_[kNumSlots] = {};
  uint32_t section_bytes_[kNumSlots] = {};
  uint32_t count_[kNumSlots] = {};
  void* const* tensor_data_ = nullptr;
};

// Parses and validates `size` bytes at `data` (which must be 16-byte
// aligned). On error `out` is left empty and the Status says what and where.
//
// With `tensor_data` (one address per tensor, which must outlive the Model)
// the program's tensors live where the caller holds them: arena tensors at
// 16-byte aligned addresses, constants at addresses aligned to their element
// size, none of them in the blob's CONSTANTS section, and the program needs
// no arena (ComputeMemoryRequirements says 0). The records' arena offsets
// still describe a layout without overlaps, so every aliasing check works
// on them as for any program; the caller guarantees that the real buffers
// do not overlap either. This is how one op runs on ExecuTorch's tensors
// without a copy (espnn/single_op.h).
Status ParseModel(const void* data, size_t size, Model* out, void* const* tensor_data = nullptr);

const char* OpcodeName(xts3::Opcode op);  // "CONV2D", or "UNKNOWN"
uint32_t OpcodeMaxInputs(xts3::Opcode op);  // 0 for an unknown opcode
uint32_t OpcodeNumParams(xts3::Opcode op);  // parameter words; 0 for an unknown opcode
const char* DTypeName(xts3::DType dtype);  // "INT8", or "UNKNOWN"
uint32_t DTypeSize(xts3::DType dtype);     // 0 for an unknown dtype

}  // namespace espnn
