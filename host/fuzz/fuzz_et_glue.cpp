// libFuzzer target: the ExecuTorch glue (EspNNBackend, registered in
// libexecutorch.so of the executorch wheel) — init() on a corrupted payload,
// then execute() with matching or deliberately mismatching tensors, destroy().
//
// Input: one control byte, then the payload (the seeds are real lowered
// XTS3 payloads, see make_glue_corpus.py). Control byte:
//   bit 0     the payload lies at an odd address (init must copy it and free
//             the processed buffer; an aligned one is used in place, kept);
//   bits 1-3  how the execute() arguments differ from the payload's graph
//             I/O: 0 not at all, else one of Mismatch below;
//   bits 4-5  which argument is made wrong (modulo the argument count);
//   bit 6     an event tracer is attached (per-op profiling path).
//
// fuzz_et_glue_heap is the same target with the glue's heap memory source
// (CONFIG_ESPNN_MEMORY_INTERNAL_FIRST: espnn_pal_malloc, linked with
// -Wl,--wrap so this file caps each block at kMaxBlock and counts the live
// ones): every block must be freed again by destroy() or by the failed init.
//
// Findings (abort): sanitizer reports; init's verdict disagreeing with
// ParseModel on the same bytes; a failure without a logged reason; the
// processed buffer freed while the model reads it, or kept after a copy;
// execute() failing on matching tensors, succeeding on mismatching ones, or
// writing an output when it fails; any heap allocation inside execute().
#include <stdio.h>
#include <stdlib.h>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/runtime.h>

#include "espnn/executorch_backend.h"
#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "espnn/platform.h"
#include "et_test_support.h"
#include "fuzz_common.h"

extern "C" int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, size_t), void (*free_hook)(const volatile void*));

namespace {

using executorch::aten::ScalarType;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::Span;

// Per-block cap: arena, scratch and payload copy of at most 256 KiB keep an
// execution in the millisecond range (the runtime's own limits are larger;
// a refusal here is a MemoryAllocationFailed the glue must handle).
constexpr size_t kMaxBlock = 256u << 10;

enum Mismatch : uint8_t {
  kNone = 0,
  kDtype = 1,      // same element size, other dtype (int8 <-> uint8, int32 <-> float)
  kShape = 2,      // same element count, other sizes (or one more element)
  kRank = 3,       // a leading 1 added: same bytes, one more dim
  kArgCount = 4,   // one argument missing
  kDimOrder = 5,   // last two dims swapped in the dim order (channels-last-like)
  kNotTensor = 6,  // an int where a tensor belongs
  kNullData = 7,   // a tensor without data
};

thread_local int g_counting = 0;
thread_local unsigned long g_allocs = 0;
void OnMalloc(const volatile void*, size_t) {
  if (g_counting) ++g_allocs;
}
void OnFree(const volatile void*) {}

unsigned long g_error_logs = 0;
long g_pal_live = 0;  // espnn_pal_malloc blocks not yet freed (heap variant)

// Every block its own exact-size heap allocation, so ASan sees a one-byte
// overrun of the arena, the scratch or the payload copy.
class ExactAllocator final : public MemoryAllocator {
 public:
  ExactAllocator() : MemoryAllocator(0, nullptr) {}
  ~ExactAllocator() override { reset(); }
  void* allocate(size_t size, size_t alignment) override {
    if (size > kMaxBlock || n_ == kMaxBlocks || alignment > 4096) return nullptr;
    void* p = nullptr;
    if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment, size ? size : 1) != 0)
      return nullptr;
    blocks_[n_++] = p;
    return p;
  }
  void reset() override {
    for (size_t i = 0; i < n_; ++i) free(blocks_[i]);
    n_ = 0;
  }

 private:
  static constexpr size_t kMaxBlocks = 8;
  void* blocks_[kMaxBlocks] = {};
  size_t n_ = 0;
};

struct FreeRecord {
  bool freed = false;
};
void RecordFree(void* ctx, void*, size_t) { static_cast<FreeRecord*>(ctx)->freed = true; }

ScalarType ToScalarType(espnn::xts3::DType d) {
  switch (d) {
    case espnn::xts3::DType::INT8: return ScalarType::Char;
    case espnn::xts3::DType::INT32: return ScalarType::Int;
    case espnn::xts3::DType::FLOAT32: return ScalarType::Float;
  }
  return ScalarType::Undefined;
}
ScalarType OtherDtype(ScalarType t) {
  switch (t) {
    case ScalarType::Char: return ScalarType::Byte;
    case ScalarType::Int: return ScalarType::Float;
    default: return ScalarType::Int;
  }
}

// One execute() argument shaped after `info`, then broken as `mismatch` says.
struct Arg {
  void Build(const espnn::TensorInfo& info, Mismatch mismatch, bool is_output) {
    int32_t sizes[espnn_test::OwnedTensor::kMaxRank];
    uint8_t order[espnn_test::OwnedTensor::kMaxRank];
    int rank = (int)info.rank;
    for (int i = 0; i < rank; ++i) {
      sizes[i] = (int32_t)info.dims[i];
      order[i] = (uint8_t)i;
    }
    ScalarType type = ToScalarType(info.dtype);
    size_t bytes = info.nbytes;
    if (mismatch == kDtype) type = OtherDtype(type);
    if (mismatch == kShape) {
      int a = -1, b = -1;
      for (int i = 0; i < rank && b < 0; ++i)
        for (int j = i + 1; j < rank && b < 0; ++j)
          if (sizes[i] != sizes[j]) a = i, b = j;
      if (b >= 0) {
        int32_t t = sizes[a];
        sizes[a] = sizes[b];
        sizes[b] = t;
      } else {
        sizes[0] += 1;
        bytes += info.nbytes / info.dims[0];
      }
    }
    if (mismatch == kRank && rank < espnn_test::OwnedTensor::kMaxRank) {
      for (int i = rank; i > 0; --i) sizes[i] = sizes[i - 1];
      sizes[0] = 1;
      ++rank;
      for (int i = 0; i < rank; ++i) order[i] = (uint8_t)i;
    }
    if (mismatch == kDimOrder) {
      if (rank < 2) {  // no dim order to permute: make it rank 2 first
        sizes[1] = sizes[0];
        sizes[0] = 1;
        rank = 2;
        order[1] = 1;
      }
      order[rank - 2] = (uint8_t)(rank - 1);
      order[rank - 1] = (uint8_t)(rank - 2);
    }
    if (posix_memalign(&data, 16, bytes ? bytes : 1) != 0) abort();
    this->bytes = bytes;
    for (size_t i = 0; i < bytes; ++i) ((uint8_t*)data)[i] = is_output ? 0xA5 : (uint8_t)(i * 37u + 11u);
    tensor = new espnn_test::OwnedTensor(type, rank, sizes, order, mismatch == kNullData ? nullptr : data);
    value = mismatch == kNotTensor ? EValue((int64_t)7) : EValue(tensor->tensor());
  }
  ~Arg() {
    delete tensor;
    free(data);
  }
  bool Untouched() const {
    for (size_t i = 0; i < bytes; ++i)
      if (((const uint8_t*)data)[i] != 0xA5) return false;
    return true;
  }
  void* data = nullptr;
  size_t bytes = 0;
  espnn_test::OwnedTensor* tensor = nullptr;
  EValue value;
};

void NoHook(void*, bool) {}

}  // namespace

#ifdef ESPNN_FUZZ_HEAP_SOURCE
extern "C" {
void* __real_espnn_pal_malloc(size_t, espnn_mem_pref_t);
void __real_espnn_pal_free(void*);
void* __wrap_espnn_pal_malloc(size_t n, espnn_mem_pref_t pref) {
  if (n > kMaxBlock) return nullptr;  // as ExactAllocator: a refusal the glue must handle
  void* p = __real_espnn_pal_malloc(n, pref);
  if (p != nullptr) ++g_pal_live;
  return p;
}
void __wrap_espnn_pal_free(void* p) {
  if (p != nullptr) --g_pal_live;
  __real_espnn_pal_free(p);
}
}  // extern "C"
#endif

// ExecuTorch's log hook (weak in libexecutorch.so; the executable's
// definition wins): silence, but count error messages — every failure of the
// glue must come with a logged reason.
extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level, const char*,
                                        const char*, size_t, const char*, size_t) {
  if (level == kError) ++g_error_logs;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  executorch::runtime::runtime_init();
  __sanitizer_install_malloc_and_free_hooks(OnMalloc, OnFree);
  void* (*volatile alloc)(size_t) = malloc;
  g_counting = 1;
  void* p = alloc(8);
  g_counting = 0;
  free(p);
  FUZZ_CHECK(g_allocs == 1);  // the execute() allocation check is live
  FUZZ_CHECK(executorch::runtime::get_backend_class(espnn::et::kBackendName) != nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t control = data[0];
  const bool misaligned = control & 1;
  const Mismatch mismatch = (Mismatch)((control >> 1) & 7);
  const unsigned which = (control >> 4) & 3;
  const bool traced = control & 0x40;
  const uint8_t* payload = data + 1;
  const size_t n = size - 1;
  if (n == 0) return 0;  // ExecuTorch never hands a delegate an empty payload

  // The processed buffer: an exact-size heap block at an aligned or odd address.
  uint8_t* block = nullptr;
  if (posix_memalign((void**)&block, 16, n + (misaligned ? 1 : 0)) != 0) abort();
  uint8_t* bytes = block + (misaligned ? 1 : 0);
  memcpy(bytes, payload, n);
  FreeRecord freed;
  FreeableBuffer processed(bytes, n, RecordFree, &freed);

  // What the parser alone says about the same bytes (aligned copy).
  espnn_fuzz::AlignedBlob reference(payload, n);
  espnn::Model model;
  const espnn::Status parsed = espnn::ParseModel(reference.data(), reference.size(), &model);
  espnn::MemoryRequirements req{};
  if (parsed.ok()) req = espnn::ComputeMemoryRequirements(model);

  BackendInterface* backend = executorch::runtime::get_backend_class(espnn::et::kBackendName);
  ExactAllocator allocator;
  BackendInitContext init_ctx(&allocator);
  const unsigned long logs_before = g_error_logs;
  auto handle = backend->init(init_ctx, &processed, {});
  if (!handle.ok()) {
    const Error e = handle.error();
    FUZZ_CHECK(g_error_logs > logs_before);
    FUZZ_CHECK(g_pal_live == 0);  // a failed init gives back every heap block
    if (!parsed.ok()) {
      FUZZ_CHECK(e == (parsed.code() == espnn::StatusCode::kUnsupportedVersion
                           ? Error::DelegateInvalidCompatibility
                           : Error::InvalidProgram));
    } else {
      // Only memory may fail an accepted payload, and only above the cap.
      FUZZ_CHECK(e == Error::MemoryAllocationFailed);
      FUZZ_CHECK(req.arena_bytes > kMaxBlock || req.scratch_bytes > kMaxBlock ||
                 (misaligned && n > kMaxBlock));
    }
    free(block);
    return 0;
  }
  FUZZ_CHECK(parsed.ok());
  // Copied (odd address) -> freed; used in place -> kept.
  FUZZ_CHECK(freed.freed == misaligned);

  // execute(): arguments are the payload's inputs then outputs.
  const uint32_t num_in = model.num_inputs(), num_out = model.num_outputs();
  const uint32_t num_args = num_in + num_out;
  const uint32_t target = which % num_args;
  Arg* args = new Arg[num_args];
  EValue* ptrs[2 * espnn::xts3::kMaxGraphInputs + 2 * espnn::xts3::kMaxGraphOutputs];
  for (uint32_t i = 0; i < num_args; ++i) {
    const bool is_out = i >= num_in;
    const espnn::TensorInfo info = is_out ? model.tensor(model.output(i - num_in)) : model.tensor(model.input(i));
    args[i].Build(info, i == target ? mismatch : kNone, is_out);
    ptrs[i] = &args[i].value;
  }
  const size_t passed = mismatch == kArgCount ? num_args - 1 : num_args;
  espnn_test::ProbeTracer tracer(NoHook, nullptr);
  BackendExecutionContext exec_ctx(traced ? &tracer : nullptr);
  const unsigned long logs_before_exec = g_error_logs;
  g_allocs = 0;
  g_counting = 1;
  const Error e = backend->execute(exec_ctx, handle.get(), Span<EValue*>(ptrs, passed));
  g_counting = 0;
  FUZZ_CHECK(g_allocs == 0);
  if (mismatch == kNone) {
    FUZZ_CHECK(e == Error::Ok);
    if (traced) FUZZ_CHECK(tracer.delegate_events() == model.num_ops());
  } else {
    FUZZ_CHECK(e == Error::InvalidArgument);
    FUZZ_CHECK(g_error_logs > logs_before_exec);
    for (uint32_t i = num_in; i < num_args; ++i) FUZZ_CHECK(args[i].Untouched());
  }
  backend->destroy(handle.get());
  FUZZ_CHECK(g_pal_live == 0);  // destroy() gives back every heap block
  delete[] args;
  processed.Free();
  free(block);
  return 0;
}
