// The host-only half of ops/s3_route.h: the lookup and the fallback route.
#include "ops/s3_route.h"

#ifdef ESPNN_DESCRIBE_S3_ROUTES
#include <stdarg.h>
#include <string.h>

namespace espnn {

const S3RouteRule* LookupS3RouteRule(xts3::Opcode opcode) {
  const OpKernel* k = LookupOpKernel(opcode);
  return k != nullptr ? k->s3_route : nullptr;
}

void SetS3Route(S3Route* route, bool simd, double simd_fraction, const char* kernel, const char* fmt, ...) {
  route->simd = simd;
  route->simd_fraction = simd_fraction;
  route->kernel = kernel;
  va_list args;
  va_start(args, fmt);
  vsnprintf(route->reason, sizeof route->reason, fmt, args);
  va_end(args);
}

const char* const kS3FullyConnectedKernels[] = {"FC ACCX dot product", "esp_nn_fc_s16_esp32s3", nullptr};

void DescribeS3FullyConnectedCall(S3Route* route, int32_t filter_offset, uint32_t row_len, const char* offset_name,
                                  const char* row_name) {
  if (filter_offset == 0 && row_len >= 16)
    SetS3Route(route, true, 1.0, kS3FullyConnectedKernels[0], "%s 0, %s >= 16, aligned rows", offset_name, row_name);
  else
    SetS3Route(route, true, 1.0, kS3FullyConnectedKernels[1], "%s < 16 or %s != 0: s16 asm", row_name, offset_name);
}

S3Route DescribeS3Route(const OpInfo& op, const EvalContext& ctx) {
  S3Route route;
  const S3RouteRule* rule = LookupS3RouteRule(op.opcode);
  if (rule == nullptr) {
    SetS3Route(&route, false, 0.0, kS3DefaultKernel, "%s", kS3DefaultReason);
    return route;
  }
  if (rule->describe == nullptr)
    SetS3Route(&route, false, 0.0, rule->kernels[0], "%s", rule->doc);
  else
    rule->describe(op, ctx, &route);
  return route;
}

}  // namespace espnn
#endif
