// What an optimized ESP32-S3 build runs for each op, told by the ops
// themselves: the host tools (analysis, reports, the lowering's one-channel
// stem choice) ask this instead of restating the routing in Python.
//
// Each routing rule is one predicate in its op file (conv.cpp RouteConv,
// depthwise_conv.cpp RouteDepthwise, pooling.cpp S3PoolSimd, ...), which the
// op's eval() calls with kEspnnS3Optimized and its description calls as an
// optimized S3 build would (true). The description adds which routine
// ESP-NN 1.2.3's own S3 dispatch then picks inside the call (its
// _esp32s3.S and C wrappers; docs/performance.md), and whether that is SIMD.
//
// The descriptions (their strings and ESP-NN's dispatch model) are compiled
// only where ESPNN_DESCRIBE_S3_ROUTES is defined: the host build of the
// runtime (host/CMakeLists.txt). Firmware never asks, so the chip carries
// neither the strings (a few KB of .rodata) nor a fourth pointer per kernel;
// the predicates it does run are the same code either way.
#pragma once

#ifdef ESPNN_DESCRIBE_S3_ROUTES
#include <stdint.h>
#include <stdio.h>

#include "ops/conv_util.h"
#include "ops/op_kernel.h"

namespace espnn {

// One op's path on an optimized ESP32-S3 build.
struct S3Route {
  bool simd = false;           // the main path runs on the S3's vector unit (PIE)
  double simd_fraction = 0.0;  // share of the op's MACs on that path
  const char* kernel = "";     // which implementation runs
  char reason[200] = {};       // the rule that decided
};

// An op family's description: `kernels` lists every kernel `describe` can
// name (nullptr-terminated; the device-evidence cases must reach each), and
// `doc` states the rules with their sources. A null `describe`: the family
// has no SIMD path whatever the geometry, always kernels[0] for `doc`'s reason.
struct S3RouteRule {
  const char* doc;
  const char* const* kernels;
  void (*describe)(const OpInfo& op, const EvalContext& ctx, S3Route* route);
};

// Defines the S3RouteRule `rule` of an op family that always runs `kernel`
// off the vector unit, for the reason `doc`.
#define ESPNN_S3_SCALAR_ROUTE(rule, kernel, doc)        \
  const char* const rule##Kernels[] = {kernel, nullptr}; \
  const S3RouteRule rule = {doc, rule##Kernels, nullptr}

// The route of an op without a rule: the interpreter's own code.
constexpr const char* kS3DefaultKernel = "interpreter";
constexpr const char* kS3DefaultReason = "no ESP-NN kernel (data movement, quantization, LUT)";

// The route of one op (kS3Default* for ops without a rule).
// `ctx` as at run time: alignment comes from its data pointers.
S3Route DescribeS3Route(const OpInfo& op, const EvalContext& ctx);

// The rule of an opcode, or nullptr when it has none.
const S3RouteRule* LookupS3RouteRule(xts3::Opcode opcode);

// The route of a depthwise layer of this geometry whose images are all
// 16-byte aligned, for the lowering (which asks it whether a one-channel
// conv has a SIMD path as a depthwise layer) before a program exists. `route_name`: which
// branch of depthwise_conv.cpp's RouteDepthwise decided ("own_kernel",
// "staged_padding", "ansi_tiled_pad_defect", "espnn").
S3Route DescribeS3DepthwiseLayer(const conv_util::ConvShape& shape, const xts3::DEPTHWISE_CONV2D_Params& params,
                                 const char** route_name);

// ESP-NN 1.2.3's S3 esp_nn_fully_connected_s8 call (FULLY_CONNECTED; per
// output row, BATCH_MATMUL): filter offset 0 and a row of >= 16 elements at
// a 16-byte aligned address -> C loop with an ACCX dot product; otherwise its
// s16 asm. Both are vector paths; both callers copy a misaligned row to the
// aligned scratch first. `offset_name`/`row_name` name the two in the reason.
extern const char* const kS3FullyConnectedKernels[];
void DescribeS3FullyConnectedCall(S3Route* route, int32_t filter_offset, uint32_t row_len, const char* offset_name,
                                  const char* row_name);

// Fills `route` (reason as printf).
void SetS3Route(S3Route* route, bool simd, double simd_fraction, const char* kernel, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace espnn

// The fourth member of an op's kernel initializer: `, &rule` on the host.
#define ESPNN_S3_ROUTE(rule) , &rule
#else
#define ESPNN_S3_ROUTE(rule)
#endif
