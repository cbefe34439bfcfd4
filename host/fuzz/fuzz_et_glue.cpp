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
//   bit 6     an event tracer is attached (per-op profiling path);
//   bit 7     random layout: the input's LAST byte (not part of the payload)
//             gives the chosen argument a dim order (bits 0-4: the k-th
//             permutation of its dims, identity included) and a stride
//             change (bits 5-6: none, innermost stride x2, outermost stride
//             +1, a zero stride), on top of the mismatch of bits 1-3. The
//             argument is expected to be refused exactly when the dim order
//             is not the identity or a stride of a dim of size > 1 changed.
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

// A random layout for one argument (control bit 7): the k-th permutation of
// the dims as the dim order, and one stride change.
struct Layout {
  bool active = false;
  uint8_t permutation = 0;  // 0..31, taken modulo rank!
  uint8_t stride_change = 0;  // 0 none, 1 innermost x2, 2 outermost +1, 3 zero
};

// The k-th permutation of 0..rank-1 in lexicographic order (k modulo rank!).
void KthPermutation(int rank, uint64_t k, uint8_t* order) {
  uint8_t pool[espnn_test::OwnedTensor::kMaxRank];
  uint64_t fact = 1;  // rank! (16! fits in 64 bits)
  for (int i = 0; i < rank; ++i) {
    pool[i] = (uint8_t)i;
    fact *= (uint64_t)(i + 1);
  }
  k %= fact;
  for (int i = 0, left = rank; i < rank; ++i, --left) {
    fact /= (uint64_t)left;  // (left - 1)!
    const int pick = (int)(k / fact);
    k %= fact;
    order[i] = pool[pick];
    for (int j = pick; j + 1 < left; ++j) pool[j] = pool[j + 1];
  }
}

// One execute() argument shaped after `info`, then broken as `mismatch` says.
struct Arg {
  // Returns whether the random layout alone makes the argument a mismatch.
  bool ApplyLayout(const Layout& layout, int rank, const int32_t* sizes) {
    uint8_t order[espnn_test::OwnedTensor::kMaxRank];
    KthPermutation(rank, layout.permutation, order);
    bool refused = false;
    for (int i = 0; i < rank; ++i) refused |= order[i] != i;
    // Rebuild with the permuted dim order (strides follow it)...
    delete tensor;
    tensor = new espnn_test::OwnedTensor(type, rank, sizes, order, data);
    // ...then change one stride of a dim whose size is not 1 (a size-1 dim's
    // stride moves no address: any value is accepted).
    int inner = -1, outer = -1;
    for (int i = 0; i < rank; ++i)
      if (sizes[order[i]] != 1) {
        if (outer < 0) outer = order[i];
        inner = order[i];
      }
    const int32_t* strides = tensor->tensor().strides().data();
    if (layout.stride_change == 1 && inner >= 0) tensor->SetStride(inner, strides[inner] * 2);
    if (layout.stride_change == 2 && outer >= 0) tensor->SetStride(outer, strides[outer] + 1);
    if (layout.stride_change == 3 && outer >= 0) tensor->SetStride(outer, 0);
    refused |= layout.stride_change != 0 && outer >= 0;
    value = EValue(tensor->tensor());
    return refused;
  }

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
    this->type = type;
    this->rank = rank;
    for (int i = 0; i < rank; ++i) this->sizes[i] = sizes[i];
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
  ScalarType type = ScalarType::Char;
  int rank = 0;
  int32_t sizes[espnn_test::OwnedTensor::kMaxRank] = {};
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
  Layout layout;
  if (control & 0x80) {
    if (size < 3) return 0;
    layout.active = true;
    layout.permutation = data[size - 1] & 0x1f;
    layout.stride_change = (data[size - 1] >> 5) & 3;
    --size;
  }
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
  // With a random layout, kDimOrder's fixed swap gives way to it.
  const Mismatch built = layout.active && mismatch == kDimOrder ? kNone : mismatch;
  Arg* args = new Arg[num_args];
  EValue* ptrs[2 * espnn::xts3::kMaxGraphInputs + 2 * espnn::xts3::kMaxGraphOutputs];
  for (uint32_t i = 0; i < num_args; ++i) {
    const bool is_out = i >= num_in;
    const espnn::TensorInfo info = is_out ? model.tensor(model.output(i - num_in)) : model.tensor(model.input(i));
    args[i].Build(info, i == target ? built : kNone, is_out);
    ptrs[i] = &args[i].value;
  }
  // The random layout goes on a tensor argument that mismatch left a tensor
  // with data (a not-tensor or data-less one is refused before any layout).
  bool refuse = built != kNone;
  if (layout.active && built != kNotTensor && built != kNullData && built != kArgCount)
    refuse |= args[target].ApplyLayout(layout, args[target].rank, args[target].sizes);
  const size_t passed = mismatch == kArgCount ? num_args - 1 : num_args;
  espnn_test::ProbeTracer tracer(NoHook, nullptr);
  BackendExecutionContext exec_ctx(traced ? &tracer : nullptr);
  const unsigned long logs_before_exec = g_error_logs;
  g_allocs = 0;
  g_counting = 1;
  const Error e = backend->execute(exec_ctx, handle.get(), Span<EValue*>(ptrs, passed));
  g_counting = 0;
  FUZZ_CHECK(g_allocs == 0);
  if (!refuse) {
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
