// Runs a parsed XTS3 graph. Memory is the caller's: one arena (activations,
// offsets planned ahead of time and stored in the blob), one scratch
// buffer shared by every op (the maximum of ESP-NN's get_*_scratch_size over
// the graph) and, for a graph with fused regions (BAND_LOOP), persistent
// memory where Init describes each region once for every Invoke to read
// (docs/performance.md, "Fused regions: memory and stack"). Init and Invoke
// allocate nothing.
//
// ESP-NN keeps its scratch pointers in process-wide globals, so two
// Interpreters must not Invoke concurrently unless the caller serializes
// them (the ExecuTorch glue does).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/model.h"
#include "espnn/status.h"

namespace espnn {

struct MemoryRequirements {
  uint32_t arena_bytes;    // from the blob header
  uint32_t scratch_bytes;  // max over ops, rounded up to 16
  // The fused regions' descriptions (0 without BAND_LOOP): per region a
  // header and arrays sized to its ops and tensors; a multiple of 16.
  uint32_t persistent_bytes;
};

// Sizes the caller must provide to Interpreter::Init for this model. The
// scratch size comes from the ESP-NN build linked in (0 for ANSI kernels,
// more for the ESP32-S3 SIMD paths), so it is only known on the target.
MemoryRequirements ComputeMemoryRequirements(const Model& model);

class Interpreter {
 public:
  // `arena`, `scratch` and `persistent` must be 16-byte aligned and at
  // least as large as ComputeMemoryRequirements says (each may be null when
  // it says 0). `persistent` must stay untouched while the Interpreter lives.
  Status Init(const Model* model, void* arena, size_t arena_bytes, void* scratch,
              size_t scratch_bytes, void* persistent = nullptr, size_t persistent_bytes = 0);

  bool initialized() const { return model_ != nullptr; }
  const Model& model() const { return *model_; }

  uint32_t num_inputs() const { return model_->num_inputs(); }
  uint32_t num_outputs() const { return model_->num_outputs(); }
  TensorInfo input_info(uint32_t i) const { return model_->tensor(model_->input(i)); }
  TensorInfo output_info(uint32_t i) const { return model_->tensor(model_->output(i)); }
  // Where the caller writes graph input i before Invoke (nbytes in input_info);
  // nullptr for an EXTERNAL input, which the caller binds instead.
  void* input_data(uint32_t i) const;
  // Points EXTERNAL graph input i at the caller's bytes (exactly nbytes,
  // aligned to the element size); they must stay valid through Invoke.
  Status BindInput(uint32_t i, const void* data, size_t nbytes);
  // Points EXTERNAL graph output i at the caller's buffer (exactly nbytes,
  // aligned to the element size): Invoke writes the output there, not in
  // the arena. It must stay valid through Invoke; Invoke refuses to run
  // while an EXTERNAL output is unbound.
  Status BindOutput(uint32_t i, void* data, size_t nbytes);
  // Where graph output i is after Invoke (the bound buffer for an EXTERNAL
  // output, nullptr while it is unbound).
  const void* output_data(uint32_t i) const;

  // Runs every op in order.
  Status Invoke();
  // Runs op `index` only (for per-op profiling); ops run in order 0..n-1.
  Status InvokeOp(uint32_t index);

 private:
  // Every EXTERNAL input and output bound (Invoke's precondition).
  Status CheckBound() const;
  // Runs op `index` (in range, not inside a fused region).
  Status RunOp(uint32_t index);

  const Model* model_ = nullptr;
  uint8_t* arena_ = nullptr;
  uint8_t* scratch_ = nullptr;
  uint32_t scratch_bytes_ = 0;
  const void* regions_ = nullptr;  // `persistent`: the fused regions' records (Init)
  uint32_t num_regions_ = 0;
  const void* external_[xts3::kMaxGraphInputs] = {};  // BindInput, by graph input
  void* external_out_[xts3::kMaxGraphOutputs] = {};   // BindOutput, by graph output
};

}  // namespace espnn
