// The per-opcode contract between the parser, the interpreter and the op
// implementations (one file per op family in this directory).
#pragma once

#include <stdint.h>

#include "espnn/model.h"
#include "espnn/status.h"

namespace espnn {

// What an op sees while it runs: tensor data resolved to pointers, and the
// one scratch buffer shared by all ops (sized at init, 16-byte aligned).
struct EvalContext {
  const Model* model;
  uint8_t* arena;
  uint8_t* scratch;
  uint32_t scratch_bytes;

  TensorInfo tensor(uint16_t index) const { return model->tensor(index); }
  // Read-only data of any tensor (arena or constant); nullptr for kNoTensor.
  const uint8_t* in(uint16_t index) const;
  // Writable data of an arena tensor.
  uint8_t* out(uint16_t index) const;
};

struct OpKernel {
  // Semantic checks run by ParseModel once the generic record checks passed:
  // dtypes, ranks, shapes, constants, parameter ranges, ESP-NN limits. After
  // it returns ok, `eval` must not be able to read or write out of bounds.
  Status (*validate)(const Model& model, const OpInfo& op);
  // Scratch bytes this op needs at run time (ESP-NN's get_*_scratch_size
  // plus the interpreter's own needs); nullptr means none.
  uint32_t (*scratch_bytes)(const Model& model, const OpInfo& op);
  // Runs the op. Allocates nothing.
  Status (*eval)(const OpInfo& op, const EvalContext& ctx);
};

// The kernel of an opcode known to this runtime, else nullptr.
const OpKernel* LookupOpKernel(xts3::Opcode opcode);

}  // namespace espnn
