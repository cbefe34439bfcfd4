// The per-opcode contract between the parser, the interpreter and the op
// implementations (one file per op family in this directory).
#pragma once

#include <stdint.h>

#include "espnn/model.h"
#include "espnn/status.h"

namespace espnn {

struct S3RouteRule;  // ops/s3_route.h (host builds only)

// A band of an NHWC tensor [1,H,W,C] inside a fused region (BAND_LOOP): the
// op sees `rows` rows at `data` instead of the whole tensor (rows of an NHWC
// image are contiguous, so a band is a smaller image).
struct TensorView {
  uint16_t tensor;
  uint32_t rows;
  uint8_t* data;
};

// What an op sees while it runs: tensor data resolved to pointers, and the
// one scratch buffer shared by all ops (sized at init, 16-byte aligned).
// In a fused region `views` replaces some tensors by bands (ops/band_loop.cpp);
// kernels read geometry through tensor() and data through in()/out(), so the
// same code runs on the whole tensor and on a band.
struct EvalContext {
  const Model* model;
  uint8_t* arena;
  uint8_t* scratch;
  uint32_t scratch_bytes;
  const TensorView* views = nullptr;
  uint32_t num_views = 0;
  // Caller-bound data of EXTERNAL graph inputs, by graph input position
  // (Interpreter::BindInput); nullptr entries for the others.
  const void* const* external = nullptr;
  // Caller-bound buffers of EXTERNAL graph outputs, by graph output position
  // (Interpreter::BindOutput); nullptr entries for the others.
  void* const* external_out = nullptr;
  // The fused regions described at Interpreter::Init (band::FindRegion).
  const void* regions = nullptr;
  uint32_t num_regions = 0;
  // In a fused region's band (ops/band_loop.cpp RunOpRows): the image rows
  // that row 0 of the op's output view and of its input 0 view are (0
  // outside regions). Ops whose row mapping is a table (RESIZE_*) index it
  // with them; the others get the band through their top pad.
  uint32_t band_out_row = 0, band_in_row = 0;

  TensorInfo tensor(uint16_t index) const;
  // Read-only data of any tensor (arena or constant); nullptr for kNoTensor.
  const uint8_t* in(uint16_t index) const;
  // Writable data of an arena tensor (or of an EXTERNAL graph output).
  uint8_t* out(uint16_t index) const;

 private:
  const TensorView* view(uint16_t index) const {
    for (uint32_t i = 0; i < num_views; ++i)
      if (views[i].tensor == index) return &views[i];
    return nullptr;
  }
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
#ifdef ESPNN_DESCRIBE_S3_ROUTES
  // How an optimized ESP32-S3 build routes the op (ops/s3_route.h); nullptr:
  // the interpreter's own code. Host builds only.
  const S3RouteRule* s3_route = nullptr;
#endif
};

// The kernel of an opcode known to this runtime, else nullptr.
const OpKernel* LookupOpKernel(xts3::Opcode opcode);

}  // namespace espnn
