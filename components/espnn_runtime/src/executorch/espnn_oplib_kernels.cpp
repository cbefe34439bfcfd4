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
#define ESPNN_X(name, opcode, activations) xts3::kNumParams_##opcode,
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

void Run(const char* name, xts3::Opcode opcode, uint32_t activations, etr::KernelRuntimeContext& ctx,
         etr::Span<etr::EValue*> stack) {
  // The oplib ops have a fixed input count (espnn/oplib_ops.h).
  const uint32_t num_inputs = OpcodeMaxInputs(opcode), num_params = OpcodeNumParams(opcode);
  const uint32_t num_scratch = OpcodeHasScratch(opcode) ? 1 : 0;
  // Arguments, then `out` (and the returned alias of `out`, if passed).
  if (stack.size() < num_inputs + num_params + num_scratch + 1) {
    ET_LOG(Error, "espnn::%s.out: %u arguments, expected %u", name, (unsigned)stack.size(),
           (unsigned)(num_inputs + num_params + num_scratch + 1));
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
  // The planned scratch (None: the op needs none for this call).
  void* scratch = nullptr;
  uint32_t scratch_bytes = 0;
  if (num_scratch && !stack[num_inputs + num_params]->isNone()) {
    if (!stack[num_inputs + num_params]->isTensor()) {
      ET_LOG(Error, "espnn::%s.out: scratch must be a tensor or None", name);
      ctx.fail(etr::Error::InvalidArgument);
      return;
    }
    const Tensor& t = stack[num_inputs + num_params]->toTensor();
    scratch = t.mutable_data_ptr();
    scratch_bytes = (uint32_t)t.nbytes();
  }
  SingleOpTensor output;
  const etr::EValue& out = *stack[num_inputs + num_params + num_scratch];
  if (!out.isTensor() || !Describe(out.toTensor(), false, &output)) {
    ET_LOG(Error, "espnn::%s.out: out must be a contiguous tensor", name);
    ctx.fail(etr::Error::InvalidArgument);
    return;
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

#define ESPNN_X(name, opcode, activations)                                        \
  void Kernel_##name(etr::KernelRuntimeContext& ctx, etr::Span<etr::EValue*> stack) { \
    Run(#name, xts3::Opcode::opcode, activations, ctx, stack);                    \
  }
ESPNN_OPLIB_OPS(ESPNN_X)
#undef ESPNN_X

const etr::Kernel kKernels[] = {
#define ESPNN_X(name, opcode, activations) etr::Kernel("espnn::" #name ".out", Kernel_##name),
    ESPNN_OPLIB_OPS(ESPNN_X)
#undef ESPNN_X
};

const etr::Error kRegistered = etr::register_kernels({kKernels, sizeof(kKernels) / sizeof(kKernels[0])});

}  // namespace

// Whether the static registration above succeeded (the Python module reports it).
bool OplibKernelsRegistered() { return kRegistered == etr::Error::Ok; }

}  // namespace et
}  // namespace espnn
