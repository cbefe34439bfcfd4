// Shared by the libFuzzer targets (host/fuzz/fuzz_*.cpp).
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "espnn/model.h"

namespace espnn_fuzz {

// The fuzzer's bytes copied into a heap block of exactly their size whose
// start is 16-byte aligned (the parser requires kBlobAlignment), so
// AddressSanitizer reports even a one-byte read past the blob's end.
class AlignedBlob {
 public:
  AlignedBlob(const uint8_t* data, size_t size) : size_(size) {
    void* p = nullptr;
    if (posix_memalign(&p, 16, size ? size : 1) != 0) abort();
    if (size) memcpy(p, data, size);
    data_ = (uint8_t*)p;
  }
  ~AlignedBlob() { free(data_); }
  AlignedBlob(const AlignedBlob&) = delete;
  AlignedBlob& operator=(const AlignedBlob&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

// A failed invariant is a finding: abort so libFuzzer saves the input.
#define FUZZ_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                  \
    }                                                                           \
  } while (0)

// Independent re-statement of what ParseModel promises about an accepted
// blob (model.h, SECURITY.md): every record the interpreter will follow
// stays inside the blob, the arena and the CONSTANTS bytes. Reading every
// tensor and op also lets ASan see any access outside the blob.
inline void CheckAcceptedModel(const espnn::Model& m, size_t size) {
  using namespace espnn;
  FUZZ_CHECK(m.size() <= size);
  FUZZ_CHECK(m.arena_size() % xts3::kArenaAlignment == 0);
  FUZZ_CHECK(m.num_tensors() <= xts3::kMaxTensors && m.num_ops() <= xts3::kMaxOps);
  FUZZ_CHECK(m.num_inputs() >= 1 && m.num_inputs() <= xts3::kMaxGraphInputs);
  FUZZ_CHECK(m.num_outputs() >= 1 && m.num_outputs() <= xts3::kMaxGraphOutputs);
  const uint8_t* blob_end = m.data() + m.size();
  for (uint32_t i = 0; i < m.num_tensors(); ++i) {
    const TensorInfo t = m.tensor(i);
    FUZZ_CHECK(t.rank >= 1 && t.rank <= xts3::kMaxRank);
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.rank; ++d) {
      FUZZ_CHECK(t.dims[d] >= 1 && t.dims[d] <= xts3::kMaxDim);
      n *= t.dims[d];
      FUZZ_CHECK(n <= xts3::kMaxTensorBytes);
    }
    FUZZ_CHECK(t.num_elements() == n);
    FUZZ_CHECK((t.flags & ~xts3::kTensorFlagsKnown) == 0);
    if (t.flags & xts3::kTensorFlagBanded) {
      // A band buffer: whole rows of an int8 [1, H, W, C] arena tensor, 1..H of them.
      FUZZ_CHECK(t.dtype == xts3::DType::INT8 && t.rank == 4 && t.dims[0] == 1);
      FUZZ_CHECK(t.memory == xts3::Memory::ARENA);
      const uint64_t row = (uint64_t)t.dims[2] * t.dims[3];
      FUZZ_CHECK(t.nbytes >= row && t.nbytes <= n && t.nbytes % row == 0);
    } else {
      FUZZ_CHECK((uint64_t)t.nbytes == n * DTypeSize(t.dtype));
    }
    if (t.flags & xts3::kTensorFlagExternal) {
      // Caller-provided FLOAT32 graph input or (format version 5) graph
      // output, never both: no arena bytes (offset 0).
      FUZZ_CHECK(t.dtype == xts3::DType::FLOAT32 && t.memory == xts3::Memory::ARENA);
      FUZZ_CHECK(t.offset == 0 && (t.flags & xts3::kTensorFlagBanded) == 0);
      bool is_input = false, is_output = false;
      for (uint32_t k = 0; k < m.num_inputs(); ++k) is_input = is_input || m.input(k) == i;
      for (uint32_t k = 0; k < m.num_outputs(); ++k) is_output = is_output || m.output(k) == i;
      FUZZ_CHECK(is_input != is_output);
      FUZZ_CHECK(!is_output || m.version() >= xts3::kExternalOutputMinVersion);
    } else if (t.memory == xts3::Memory::ARENA) {
      FUZZ_CHECK(t.offset % xts3::kArenaAlignment == 0);
      FUZZ_CHECK((uint64_t)t.offset + t.nbytes <= m.arena_size());
    } else {
      FUZZ_CHECK(t.memory == xts3::Memory::CONSTANT);
      const uint8_t* c = m.constant_data(t);
      FUZZ_CHECK(c >= m.data() && c + t.nbytes <= blob_end);
      FUZZ_CHECK((uintptr_t)c % DTypeSize(t.dtype) == 0);
    }
  }
  for (uint32_t i = 0; i < m.num_ops(); ++i) {
    const OpInfo op = m.op(i);
    FUZZ_CHECK(op.num_inputs <= xts3::kMaxOpInputs && op.num_outputs <= xts3::kMaxOpOutputs);
    for (uint32_t k = 0; k < op.num_inputs; ++k)
      FUZZ_CHECK(op.inputs[k] == xts3::kNoTensor || op.inputs[k] < m.num_tensors());
    for (uint32_t k = 0; k < op.num_outputs; ++k) {
      FUZZ_CHECK(op.outputs[k] < m.num_tensors());
      FUZZ_CHECK(m.tensor(op.outputs[k]).memory == xts3::Memory::ARENA);
      // An op writes an EXTERNAL tensor only when it is a graph output (version 5).
      if (m.tensor(op.outputs[k]).flags & xts3::kTensorFlagExternal) {
        bool is_output = false;
        for (uint32_t g = 0; g < m.num_outputs(); ++g) is_output = is_output || m.output(g) == op.outputs[k];
        FUZZ_CHECK(is_output);
      }
    }
    FUZZ_CHECK(op.params + 4u * op.params_count <= blob_end && op.params >= m.data());
    FUZZ_CHECK(strcmp(OpcodeName(op.opcode), "UNKNOWN") != 0);
  }
  for (uint32_t i = 0; i < m.num_inputs(); ++i) FUZZ_CHECK(m.input(i) < m.num_tensors());
  for (uint32_t i = 0; i < m.num_outputs(); ++i) FUZZ_CHECK(m.output(i) < m.num_tensors());
}

}  // namespace espnn_fuzz
