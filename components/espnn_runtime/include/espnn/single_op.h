// One op of the interpreter run on the caller's tensors: the entry point of
// the operator-library mode (docs/oplib.md), where ExecuTorch plans memory
// and calls one kernel per op instead of handing a whole XTS3 program to the
// delegate.
//
// RunSingleOp writes a one-op XTS3 program for the call (constants copied
// into it, activations in a private arena), parses it with ParseModel and
// runs it with the Interpreter. So the op's parameter checks (OpKernel
// validate), its scratch size and its kernel wrapper are exactly the ones the
// delegate runs: nothing about an op is restated here.
//
// A call allocates nothing and copies no tensor: the one-op program (records
// only, about 2 KB on the stack) is parsed with ParseModel's tensor_data, so
// the op reads its inputs and weights and writes its output where the caller
// holds them, and its scratch is the caller's. What a call costs beyond the
// kernel is writing and checking that program.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/status.h"
#include "espnn/xts3_format.h"

namespace espnn {

struct SingleOpTensor {
  xts3::DType dtype = xts3::DType::INT8;
  uint8_t rank = 0;
  uint32_t dims[xts3::kMaxRank] = {};
  // Inputs: the bytes (nullptr = an absent optional input); outputs: where
  // the result is written (exactly the tensor's bytes).
  void* data = nullptr;
  // CONSTANT: copied into the program's CONSTANTS section (weights, bias,
  // multipliers); otherwise an activation, copied into the arena.
  bool constant = false;
  int32_t zero_point = 0;
  float scale = 0.0f;
};

struct SingleOpCall {
  xts3::Opcode opcode;
  const SingleOpTensor* inputs;
  uint32_t num_inputs;
  const SingleOpTensor* outputs;
  uint32_t num_outputs;
  const int32_t* params;  // the opcode's parameter words (xts3_format.h order)
  uint32_t num_params;
  // The op's scratch, planned by the caller (16-byte aligned, at least
  // SingleOpScratchBytes), or nullptr when it planned none.
  void* scratch = nullptr;
  uint32_t scratch_bytes = 0;
  // When the op needs more scratch than `scratch_bytes` (a program lowered
  // on a host whose ESP-NN build needs less than this target's), RunSingleOp
  // asks for that many 16-byte aligned bytes here (e.g. ExecuTorch's temp
  // allocator); nullptr, or a nullptr result, fails the call.
  void* (*more_scratch)(void* user, uint32_t bytes) = nullptr;
  void* more_scratch_user = nullptr;
};

// The scratch bytes the op needs (the interpreter's ComputeMemoryRequirements
// of the one-op program: ESP-NN's get_*_scratch_size of the ESP-NN build
// linked in, plus the op's own staging). Activation data is not read.
Status SingleOpScratchBytes(const SingleOpCall& call, uint32_t* bytes);

// Whether the opcode's kernel in this build sizes a scratch buffer at all
// (the operator-library ops then take a `scratch` argument).
bool OpcodeHasScratch(xts3::Opcode opcode);

// Runs the op; when the parser or the op's checks refuse the call nothing is
// written to the outputs, and the Status carries their message. Callers serialize calls that
// may run concurrently (ESP-NN's scratch is process-wide).
Status RunSingleOp(const SingleOpCall& call);

}  // namespace espnn
