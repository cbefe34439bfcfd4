// EspNNBackend: ExecuTorch's runtime half of the delegate (the Python class
// executorch_espnn.EspNNBackend produces the XTS3 payload it runs).
//
// The same file is compiled for the chip (ESP-IDF component, when ExecuTorch
// is available to it) and for the host (host/CMakeLists.txt, linked against
// the libexecutorch.so of the executorch wheel).
//
// Memory (Kconfig ESPNN_MEMORY_SOURCE; see MemorySource below): init() takes
// the handle, the arena, the scratch buffer, the fused regions' persistent
// data (none without BAND_LOOP) and, when the payload is not
// 16-byte aligned, an aligned copy of it either from the method's runtime
// allocator (default; freed with the method) or from espnn_pal_malloc
// (heap_caps on the chip, internal RAM or PSRAM first; the host's
// platform_host.cpp), freed by destroy(). Once the payload was copied
// (misaligned, or Kconfig ESPNN_WEIGHTS_COPY_*) nothing points into the
// processed buffer and it is freed; otherwise the payload is used in place
// (constants are read from it while the method lives), so it is kept.
// execute() allocates nothing.
//
// Threading: see KernelLock in espnn/executorch_backend.h.
#include "espnn/executorch_backend.h"

#include <stdint.h>
#include <string.h>

#include <new>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/event_tracer_hooks_delegate.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/log.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "espnn/platform.h"
#include "scalar_types.h"

#ifdef ESP_PLATFORM
#include "sdkconfig.h"  // CONFIG_ESPNN_MEMORY_*
#include "freertos/FreeRTOS.h"
#include "freertos/semphr.h"
#else
#include <mutex>
#endif

namespace espnn {
namespace et {

// --- KernelLock ---------------------------------------------------------------
#ifdef ESP_PLATFORM
namespace {
StaticSemaphore_t g_lock_storage;
SemaphoreHandle_t g_lock = nullptr;

// Created by the static registration below, i.e. from ESP-IDF's global
// constructors, before the scheduler starts: no creation race.
SemaphoreHandle_t LockHandle() {
  if (g_lock == nullptr) g_lock = xSemaphoreCreateMutexStatic(&g_lock_storage);
  return g_lock;
}
}  // namespace

KernelLock::KernelLock() { xSemaphoreTake(LockHandle(), portMAX_DELAY); }
KernelLock::~KernelLock() { xSemaphoreGive(LockHandle()); }
#else
namespace {
std::mutex& LockMutex() {
  static std::mutex m;
  return m;
}
}  // namespace

KernelLock::KernelLock() { LockMutex().lock(); }
KernelLock::~KernelLock() { LockMutex().unlock(); }
#endif

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::EventTracer;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::Result;
using executorch::runtime::Span;

constexpr size_t kAlign = 16;  // blob, arena and scratch (ESP-NN SIMD loads)

// Where init() takes its memory from. The default is the method's runtime
// allocator: nothing to free, the memory goes with the method. The heap_caps
// choices of Kconfig (on the host: the same CONFIG_ symbols as compile
// definitions, so the host tests run this path too) use espnn_pal_malloc
// with a placement preference; those blocks are freed by destroy().
#if defined(CONFIG_ESPNN_MEMORY_INTERNAL_FIRST) && defined(CONFIG_ESPNN_MEMORY_PSRAM_FIRST)
#error "CONFIG_ESPNN_MEMORY_INTERNAL_FIRST and CONFIG_ESPNN_MEMORY_PSRAM_FIRST are exclusive"
#elif defined(CONFIG_ESPNN_MEMORY_INTERNAL_FIRST)
constexpr bool kHeapMemory = true;
constexpr espnn_mem_pref_t kHeapPreference = ESPNN_MEM_INTERNAL_FIRST;
#elif defined(CONFIG_ESPNN_MEMORY_PSRAM_FIRST)
constexpr bool kHeapMemory = true;
constexpr espnn_mem_pref_t kHeapPreference = ESPNN_MEM_PSRAM_FIRST;
#else
constexpr bool kHeapMemory = false;
constexpr espnn_mem_pref_t kHeapPreference = ESPNN_MEM_INTERNAL_FIRST;  // unused
#endif

// Kconfig ESPNN_WEIGHTS: constants are read where the payload lies (in place,
// the default: e.g. a .pte memory-mapped from flash) or the payload is copied
// to RAM at init — always from espnn_pal_malloc, because placement is the
// point — and the processed buffer freed. A misaligned payload is copied in
// any case (from the memory source above).
#if defined(CONFIG_ESPNN_WEIGHTS_COPY_PSRAM)
constexpr bool kCopyWeights = true;
constexpr espnn_mem_pref_t kWeightsPreference = ESPNN_MEM_PSRAM_FIRST;
#elif defined(CONFIG_ESPNN_WEIGHTS_COPY_INTERNAL)
constexpr bool kCopyWeights = true;
constexpr espnn_mem_pref_t kWeightsPreference = ESPNN_MEM_INTERNAL_FIRST;
#else
constexpr bool kCopyWeights = false;
constexpr espnn_mem_pref_t kWeightsPreference = ESPNN_MEM_INTERNAL_FIRST;  // unused
#endif

class MemorySource {
 public:
  explicit MemorySource(MemoryAllocator* runtime_allocator) : allocator_(runtime_allocator) {}
  // 16-byte aligned (espnn_pal_malloc's guarantee, kAlign for the allocator).
  void* Allocate(size_t bytes) const {
    if (kHeapMemory) return espnn_pal_malloc(bytes, kHeapPreference);
    return allocator_->allocate(bytes, kAlign);
  }
  static void Free(void* p) {
    if (kHeapMemory && p != nullptr) espnn_pal_free(p);
  }

 private:
  MemoryAllocator* allocator_;
};

// The delegate handle. With the runtime allocator destroy() only runs the
// destructor; with the heap it also frees the blocks and the handle itself.
struct DelegateState {
  Model model;
  Interpreter interpreter;
  void* payload_copy = nullptr;  // aligned copy of the payload, or null (in place)
  void* arena = nullptr;
  void* scratch = nullptr;
  void* persistent = nullptr;  // the fused regions' descriptions (Interpreter::Init)
};

// Both copy sources are decided at compile time (see kCopyWeights).
void FreePayloadCopy(void* p) {
  if (kCopyWeights) {
    if (p != nullptr) espnn_pal_free(p);
  } else {
    MemorySource::Free(p);
  }
}

void DestroyState(DelegateState* state) {
  void* blocks[3] = {state->arena, state->scratch, state->persistent};
  void* copy = state->payload_copy;
  state->~DelegateState();
  FreePayloadCopy(copy);
  for (void* b : blocks) MemorySource::Free(b);
  MemorySource::Free(state);
}

// A graph input/output of the payload against the tensor ExecuTorch passes:
// same dtype, same sizes (a payload [1] also accepts a 0-d tensor), default
// (contiguous) dim order with its dense strides. Anything else would be read
// as the wrong bytes.
Error CheckTensor(const EValue* value, const TensorInfo& info, const char* role, uint32_t index) {
  if (value == nullptr || !value->isTensor()) {
    ET_LOG(Error, "EspNNBackend: %s %u is not a tensor", role, (unsigned)index);
    return Error::InvalidArgument;
  }
  const Tensor& t = value->toTensor();
  const ScalarType want = ToScalarType(info.dtype);
  if (t.scalar_type() != want) {
    ET_LOG(Error, "EspNNBackend: %s %u has dtype %s, the payload expects %s", role, (unsigned)index,
           executorch::runtime::toString(t.scalar_type()), executorch::runtime::toString(want));
    return Error::InvalidArgument;
  }
  const bool scalar_as_1 = t.dim() == 0 && info.rank == 1 && info.dims[0] == 1;
  bool same = scalar_as_1 || static_cast<size_t>(t.dim()) == info.rank;
  for (ssize_t d = 0; same && !scalar_as_1 && d < t.dim(); ++d)
    same = t.size(d) >= 0 && static_cast<uint32_t>(t.size(d)) == info.dims[d];
  if (!same) {
    char got[64] = "", exp[64] = "";
    size_t g = 0, e = 0;
    for (ssize_t d = 0; d < t.dim() && g < sizeof(got); ++d)
      g += snprintf(got + g, sizeof(got) - g, d ? ",%ld" : "%ld", (long)t.size(d));
    for (uint32_t d = 0; d < info.rank && e < sizeof(exp); ++d)
      e += snprintf(exp + e, sizeof(exp) - e, d ? ",%u" : "%u", (unsigned)info.dims[d]);
    ET_LOG(Error, "EspNNBackend: %s %u has shape [%s], the payload expects [%s]", role, (unsigned)index,
           got, exp);
    return Error::InvalidArgument;
  }
  if (!executorch::runtime::is_contiguous_dim_order(t.dim_order().data(), t.dim())) {
    ET_LOG(Error, "EspNNBackend: %s %u is not in contiguous dim order (e.g. channels-last); "
           "the payload expects a contiguous tensor", role, (unsigned)index);
    return Error::InvalidArgument;
  }
  // Strides must be the dense ones of that order (ExecuTorch derives them
  // from the dim order; a hand-made TensorImpl may not): the payload reads
  // and writes nbytes contiguous bytes. A dim of size 1 moves no address,
  // so its stride does not matter (PyTorch leaves any value there).
  int64_t dense = 1;
  for (ssize_t d = t.dim() - 1; d >= 0; --d) {
    if (t.size(d) != 1 && t.strides()[d] != dense) {
      ET_LOG(Error, "EspNNBackend: %s %u has stride %ld in dim %ld, a dense contiguous tensor has %ld", role,
             (unsigned)index, (long)t.strides()[d], (long)d, (long)dense);
      return Error::InvalidArgument;
    }
    dense *= t.size(d);
  }
  if (t.nbytes() != info.nbytes || (info.nbytes != 0 && t.const_data_ptr() == nullptr)) {
    ET_LOG(Error, "EspNNBackend: %s %u holds %u bytes (data %s), the payload expects %u", role,
           (unsigned)index, (unsigned)t.nbytes(), t.const_data_ptr() ? "set" : "null",
           (unsigned)info.nbytes);
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

// Runs every op; with an event tracer each op is one profiling event keyed
// by the debug handle the AOT lowering stored in its op record.
Status Run(Interpreter& interp, EventTracer* tracer) {
  if (tracer == nullptr) return interp.Invoke();
  const Model& model = interp.model();
  for (uint32_t i = 0; i < model.num_ops(); ++i) {
    auto entry = executorch::runtime::event_tracer_start_profiling_delegate(
        tracer, nullptr, static_cast<executorch::runtime::DebugHandle>(model.op(i).debug_handle));
    Status s = interp.InvokeOp(i);
    executorch::runtime::event_tracer_end_profiling_delegate(tracer, entry);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

class EspNNBackend final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> /*compile_specs: all AOT*/) const override {
    MemoryAllocator* allocator = context.get_runtime_allocator();
    if ((!kHeapMemory && allocator == nullptr) || processed == nullptr || processed->data() == nullptr) {
      ET_LOG(Error, "EspNNBackend: init without a runtime allocator or payload");
      return Error::InvalidArgument;
    }
    const MemorySource memory(allocator);
    void* state_mem = memory.Allocate(sizeof(DelegateState));
    if (state_mem == nullptr) {
      ET_LOG(Error, "EspNNBackend: no memory for the delegate handle");
      return Error::MemoryAllocationFailed;
    }
    DelegateState* state = new (state_mem) DelegateState();

    const void* blob = processed->data();
    const size_t size = processed->size();
    if (kCopyWeights || reinterpret_cast<uintptr_t>(blob) % kAlign != 0) {
      state->payload_copy = kCopyWeights ? espnn_pal_malloc(size, kWeightsPreference) : memory.Allocate(size);
      if (state->payload_copy == nullptr) {
        ET_LOG(Error, "EspNNBackend: no memory for a %u-byte aligned copy of the payload", (unsigned)size);
        DestroyState(state);
        return Error::MemoryAllocationFailed;
      }
      memcpy(state->payload_copy, blob, size);
      blob = state->payload_copy;
    }

    Status s = ParseModel(blob, size, &state->model);
    if (!s.ok()) {
      ET_LOG(Error, "EspNNBackend: payload rejected: %s", s.message());
      DestroyState(state);
      // A newer format or an op this (selective) build leaves out: the
      // program is valid, this runtime cannot run it.
      return s.code() == StatusCode::kUnsupportedVersion || s.code() == StatusCode::kOpNotCompiled
                 ? Error::DelegateInvalidCompatibility
                 : Error::InvalidProgram;
    }
    const MemoryRequirements req = ComputeMemoryRequirements(state->model);
    if (req.arena_bytes) state->arena = memory.Allocate(req.arena_bytes);
    if (req.scratch_bytes) state->scratch = memory.Allocate(req.scratch_bytes);
    if (req.persistent_bytes) state->persistent = memory.Allocate(req.persistent_bytes);
    if ((req.arena_bytes && state->arena == nullptr) || (req.scratch_bytes && state->scratch == nullptr) ||
        (req.persistent_bytes && state->persistent == nullptr)) {
      ET_LOG(Error,
             "EspNNBackend: no memory for the arena (%u bytes), scratch (%u bytes) and region data "
             "(%u bytes)",
             (unsigned)req.arena_bytes, (unsigned)req.scratch_bytes, (unsigned)req.persistent_bytes);
      DestroyState(state);
      return Error::MemoryAllocationFailed;
    }
    s = state->interpreter.Init(&state->model, state->arena, req.arena_bytes, state->scratch,
                                req.scratch_bytes, state->persistent, req.persistent_bytes);
    if (!s.ok()) {
      ET_LOG(Error, "EspNNBackend: interpreter init failed: %s", s.message());
      DestroyState(state);
      return Error::InvalidProgram;
    }
    // Nothing points into the processed buffer any more once it was copied
    // (misaligned, or ESPNN_WEIGHTS_COPY_*); otherwise the model reads its
    // constants from it: keep it.
    if (state->payload_copy != nullptr) processed->Free();
    return state;
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle,
                Span<EValue*> args) const override {
    DelegateState* state = static_cast<DelegateState*>(handle);
    if (state == nullptr) return Error::InvalidState;
    Interpreter& interp = state->interpreter;
    const uint32_t num_in = interp.num_inputs();
    const uint32_t num_out = interp.num_outputs();
    if (args.size() != static_cast<size_t>(num_in) + num_out) {
      ET_LOG(Error, "EspNNBackend: %u arguments, the payload has %u inputs and %u outputs",
             (unsigned)args.size(), (unsigned)num_in, (unsigned)num_out);
      return Error::InvalidArgument;
    }
    for (uint32_t i = 0; i < num_in; ++i) {
      Error e = CheckTensor(args[i], interp.input_info(i), "input", i);
      if (e != Error::Ok) return e;
    }
    for (uint32_t i = 0; i < num_out; ++i) {
      Error e = CheckTensor(args[num_in + i], interp.output_info(i), "output", i);
      if (e != Error::Ok) return e;
    }

    // ESP-NN's scratch pointer is process-global: one delegate at a time.
    KernelLock lock;
    for (uint32_t i = 0; i < num_in; ++i) {
      const TensorInfo info = interp.input_info(i);
      const void* data = args[i]->toTensor().const_data_ptr();
      if (info.flags & espnn::xts3::kTensorFlagExternal) {
        // Zero-copy: the interpreter reads the caller's tensor in place.
        Status b = interp.BindInput(i, data, args[i]->toTensor().nbytes());
        if (!b.ok()) {
          ET_LOG(Error, "EspNNBackend: input %u: %s", (unsigned)i, b.message());
          return Error::InvalidArgument;
        }
      } else {
        memcpy(interp.input_data(i), data, info.nbytes);
      }
    }
    for (uint32_t i = 0; i < num_out; ++i) {
      if ((interp.output_info(i).flags & espnn::xts3::kTensorFlagExternal) == 0) continue;
      // Zero-copy: the last op writes ExecuTorch's output tensor itself.
      Status b = interp.BindOutput(i, args[num_in + i]->toTensor().mutable_data_ptr(),
                                   args[num_in + i]->toTensor().nbytes());
      if (!b.ok()) {
        ET_LOG(Error, "EspNNBackend: output %u: %s", (unsigned)i, b.message());
        return Error::InvalidArgument;
      }
    }
    Status s = Run(interp, context.event_tracer());
    if (!s.ok()) {
      ET_LOG(Error, "EspNNBackend: %s", s.message());
      return Error::Internal;
    }
    for (uint32_t i = 0; i < num_out; ++i) {
      const TensorInfo info = interp.output_info(i);
      if ((info.flags & espnn::xts3::kTensorFlagExternal) != 0) continue;  // written in place
      memcpy(args[num_in + i]->toTensor().mutable_data_ptr(), interp.output_data(i), info.nbytes);
    }
    return Error::Ok;
  }

  void destroy(DelegateHandle* handle) const override {
    if (handle != nullptr) DestroyState(static_cast<DelegateState*>(handle));
  }
};

// Static registration. Nothing references these symbols: static-archive
// builds must force this object in (ESP-IDF: the component compiles this file
// with CONFIG_ESPNN_EXECUTORCH_BACKEND and registers with WHOLE_ARCHIVE, see
// components/espnn_runtime/CMakeLists.txt and docs/firmware.md).
EspNNBackend g_backend;
const executorch::runtime::Backend g_backend_entry{kBackendName, &g_backend};

struct Registrar {
  Registrar() {
#ifdef ESP_PLATFORM
    (void)LockHandle();  // create the mutex before any task can race for it
#endif
    const Error e = executorch::runtime::register_backend(g_backend_entry);
    if (e != Error::Ok) ET_LOG(Error, "EspNNBackend: registration failed (0x%x)", (unsigned)e);
  }
};
const Registrar g_registrar;

}  // namespace
}  // namespace et
}  // namespace espnn
