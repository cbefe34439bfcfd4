// The operator-library mode's ExecuTorch kernels (docs/oplib.md): one
// out-variant kernel `espnn::<name>.out` per row of espnn/oplib_ops.h,
// registered with ExecuTorch's kernel registry from a static initializer
// (like EspNNBackend in espnn_backend.cpp; static archives must keep this
// object the same way).
//
// A kernel only translates ExecuTorch's arguments into a SingleOpCall:
// every check of the op, its scratch size and its ESP-NN call are the
// interpreter's (RunSingleOp runs the op as a one-op XTS3 program).
#include <stdint.h>
#include <string.h>

#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/log.h>

#include "espnn/executorch_backend.h"
#include "espnn/model.h"
#include "espnn/oplib_ops.h"
#include "espnn/single_op.h"
#include "scalar_types.h"

namespace espnn {
namespace et {
namespace {

using executorch::aten::Tensor;
namespace etr = executorch::runtime;

// The most parameter words of any oplib op (the kernels' stack buffer).
constexpr uint32_t kOplibParams[] = {
#define ESPNN_X(name, opcode, activations, zero_points) xts3::kNumParams_##opcode,
    ESPNN_OPLIB_OPS(ESPNN_X)
#undef ESPNN_X
};
constexpr uint32_t MaxOf(const uint32_t* a, uint32_t n) {
  return n == 0 ? 0 : (a[0] > MaxOf(a + 1, n - 1) ? a[0] : MaxOf(a + 1, n - 1));
}
constexpr uint32_t kMaxParams = MaxOf(kOplibParams, sizeof(kOplibParams) / sizeof(kOplibParams[0]));

bool Describe(const Tensor& t, bool constant, SingleOpTensor* out) {
  if (!FromScalarType(t.scalar_type(), &out->dtype)) return false;
  if (t.dim() < 1 || t.dim() > (ssize_t)xts3::kMaxRank ||
      !executorch::runtime::is_contiguous_dim_order(t.dim_order().data(), t.dim()))
    return false;
  out->rank = (uint8_t)t.dim();
  for (ssize_t i = 0; i < t.dim(); ++i) out->dims[i] = (uint32_t)t.size(i);
  out->data = const_cast<void*>(t.const_data_ptr());
  out->constant = constant;
  return true;
}

void Run(const char* name, xts3::Opcode opcode, uint32_t activations, bool zero_points,
         etr::KernelRuntimeContext& ctx, etr::Span<etr::EValue*> stack) {
  // The oplib ops have a fixed input count (espnn/oplib_ops.h).
  const uint32_t num_inputs = OpcodeMaxInputs(opcode), num_params = OpcodeNumParams(opcode);
  const uint32_t num_zps = zero_points ? 2 : 0;  // input 0's and the output's zero point
  const uint32_t num_scratch = OpcodeHasScratch(opcode) ? 1 : 0;
  const uint32_t num_args = num_inputs + num_params + num_zps + num_scratch;
  // Arguments, then `out` (and the returned alias of `out`, if passed).
  if (stack.size() < num_args + 1) {
    ET_LOG(Error, "espnn::%s.out: %u arguments, expected %u", name, (unsigned)stack.size(),
           (unsigned)(num_args + 1));
    ctx.fail(etr::Error::InvalidArgument);
    return;
  }
  SingleOpTensor inputs[xts3::kMaxOpInputs];
  for (uint32_t i = 0; i < num_inputs; ++i) {
    const etr::EValue& v = *stack[i];
    if (v.isNone()) continue;  // an absent optional input (data stays nullptr)
    if (!v.isTensor() || !Describe(v.toTensor(), i >= activations, &inputs[i])) {
      ET_LOG(Error, "espnn::%s.out: input %u must be a contiguous int8/int32/float32 tensor of rank 1..%u",
             name, (unsigned)i, (unsigned)xts3::kMaxRank);
      ctx.fail(etr::Error::InvalidArgument);
      return;
    }
  }
  int32_t params[kMaxParams];
  for (uint32_t p = 0; p < num_params; ++p) {
    const etr::EValue& v = *stack[num_inputs + p];
    if (v.isInt()) {
      params[p] = (int32_t)v.toInt();
    } else if (v.isDouble()) {  // *_f32 parameters travel as float32 bits
      const float f = (float)v.toDouble();
      memcpy(&params[p], &f, 4);
    } else {
      ET_LOG(Error, "espnn::%s.out: parameter %u must be an int or a float", name, (unsigned)p);
      ctx.fail(etr::Error::InvalidArgument);
      return;
    }
  }
  // The zero points the op reads from its tensor records (GRU, LSTM).
  int32_t zps[2] = {0, 0};
  for (uint32_t z = 0; z < num_zps; ++z) {
    const etr::EValue& v = *stack[num_inputs + num_params + z];
    if (!v.isInt()) {
      ET_LOG(Error, "espnn::%s.out: the %s zero point must be an int", name, z == 0 ? "input" : "output");
      ctx.fail(etr::Error::InvalidArgument);
      return;
    }
    zps[z] = (int32_t)v.toInt();
  }
  // The planned scratch (None: the op needs none for this call).
  void* scratch = nullptr;
  uint32_t scratch_bytes = 0;
  const etr::EValue& scratch_arg = *stack[num_inputs + num_params + num_zps];
  if (num_scratch && !scratch_arg.isNone()) {
    if (!scratch_arg.isTensor()) {
      ET_LOG(Error, "espnn::%s.out: scratch must be a tensor or None", name);
      ctx.fail(etr::Error::InvalidArgument);
      return;
    }
    const Tensor& t = scratch_arg.toTensor();
    scratch = t.mutable_data_ptr();
    scratch_bytes = (uint32_t)t.nbytes();
  }
  SingleOpTensor output;
  const etr::EValue& out = *stack[num_args];
  if (!out.isTensor() || !Describe(out.toTensor(), false, &output)) {
    ET_LOG(Error, "espnn::%s.out: out must be a contiguous tensor", name);
    ctx.fail(etr::Error::InvalidArgument);
    return;
  }
  if (num_zps) {
    inputs[0].zero_point = zps[0];
    output.zero_point = zps[1];
  }
  SingleOpCall call{opcode, inputs, num_inputs, &output, 1, params, num_params, scratch, scratch_bytes};
  // The lowering host sized the planned scratch with its own ESP-NN build;
  // an ESP32-S3's SIMD kernels may need more. Then the kernel takes it from
  // ExecuTorch's temp allocator (released after this kernel): memory the
  // application gives the method, never the heap.
  call.more_scratch = [](void* user, uint32_t bytes) -> void* {
    etr::Result<void*> temp = static_cast<etr::KernelRuntimeContext*>(user)->allocate_temp(bytes, 16);
    return temp.ok() ? temp.get() : nullptr;
  };
  call.more_scratch_user = &ctx;
  Status s;
  {
    KernelLock lock;  // ESP-NN's scratch pointers are process-wide
    s = RunSingleOp(call);
  }
  if (!s.ok()) {
    ET_LOG(Error, "espnn::%s.out: %s", name, s.message());
    ctx.fail(etr::Error::InvalidArgument);
  }
}

#define ESPNN_X(name, opcode, activations, zero_points)                            \
  void Kernel_##name(etr::KernelRuntimeContext& ctx, etr::Span<etr::EValue*> stack) { \
    Run(#name, xts3::Opcode::opcode, activations, zero_points != 0, ctx, stack);  \
  }
ESPNN_OPLIB_OPS(ESPNN_X)
#undef ESPNN_X

const etr::Kernel kKernels[] = {
#define ESPNN_X(name, opcode, activations, zero_points) etr::Kernel("espnn::" #name ".out", Kernel_##name),
    ESPNN_OPLIB_OPS(ESPNN_X)
#undef ESPNN_X
};

const etr::Error kRegistered = etr::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])});

}  // namespace

// Whether the static registration above succeeded (the Python module reports it).
bool OplibKernelsRegistered() { return kRegistered == etr::Error::Ok; }

}  // namespace et
}  // namespace espnn
