// libFuzzer target: ParseModel, then Interpreter::Init and one Invoke on
// deterministic inputs, for every blob the parser accepts whose arena and
// scratch are small (so a run stays fast and cannot exhaust memory).
//
// The arena and scratch are heap blocks of exactly the requested size, so
// ASan reports any kernel that reads or writes past them. Heap use during
// Invoke is a finding too (the runtime must allocate nothing there):
// the sanitizer allocator's hooks count allocations while Invoke runs.
#include <stdio.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "fuzz_common.h"

// From the sanitizer runtimes (declared here: gcc installs no
// <sanitizer/allocator_interface.h>). Hooks run on every malloc/free.
extern "C" int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, size_t), void (*free_hook)(const volatile void*));

namespace {

// Caps for this target only (the runtime's limits are far larger): 256 KiB
// of arena and of scratch keep each execution in the millisecond range.
constexpr uint32_t kMaxFuzzArena = 256u << 10;
constexpr uint32_t kMaxFuzzScratch = 256u << 10;

// Per thread: libFuzzer's own threads (its RSS monitor) allocate at any
// time, and only this thread's allocations are the runtime's.
thread_local int g_counting = 0;
thread_local unsigned long g_allocs = 0;

void OnMalloc(const volatile void*, size_t) {
  if (g_counting) ++g_allocs;
}
void OnFree(const volatile void*) {}

void* AllocExact(size_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, 16, n ? n : 1) != 0) abort();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __sanitizer_install_malloc_and_free_hooks(OnMalloc, OnFree);
  // The counting must be live, or the check in LLVMFuzzerTestOneInput is vacuous.
  void* (*volatile alloc)(size_t) = malloc;
  g_allocs = 0;
  g_counting = 1;
  void* p = alloc(8);
  g_counting = 0;
  free(p);
  FUZZ_CHECK(g_allocs == 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  espnn_fuzz::AlignedBlob blob(data, size);
  espnn::Model model;
  if (!espnn::ParseModel(blob.data(), blob.size(), &model).ok()) return 0;
  espnn_fuzz::CheckAcceptedModel(model, blob.size());
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(model);
  if (req.arena_bytes > kMaxFuzzArena || req.scratch_bytes > kMaxFuzzScratch) return 0;

  uint8_t* arena = (uint8_t*)AllocExact(req.arena_bytes);
  uint8_t* scratch = req.scratch_bytes ? (uint8_t*)AllocExact(req.scratch_bytes) : nullptr;
  uint8_t* persistent = req.persistent_bytes ? (uint8_t*)AllocExact(req.persistent_bytes) : nullptr;
  memset(arena, 0xA5, req.arena_bytes);  // deterministic, not all zero
  espnn::Interpreter interp;
  // The sizes are exactly what the model asks for: Init must accept them.
  const espnn::Status init = interp.Init(&model, arena, req.arena_bytes, scratch, req.scratch_bytes,
                                         persistent, req.persistent_bytes);
  FUZZ_CHECK(init.ok());
  uint8_t* external[espnn::xts3::kMaxGraphInputs] = {};
  for (uint32_t i = 0; i < interp.num_inputs(); ++i) {
    const espnn::TensorInfo t = interp.input_info(i);
    uint8_t* dst = (uint8_t*)interp.input_data(i);
    if (t.flags & espnn::xts3::kTensorFlagExternal) {
      // Caller-provided bytes: no arena space; bound with its exact size so
      // ASan catches any read past it.
      FUZZ_CHECK(dst == nullptr);
      dst = external[i] = (uint8_t*)AllocExact(t.nbytes);
      FUZZ_CHECK(interp.BindInput(i, dst, t.nbytes).ok());
    }
    FUZZ_CHECK(external[i] != nullptr || (dst >= arena && dst + t.nbytes <= arena + req.arena_bytes));
    // Bytes that cover every int8 value and many float32 bit patterns
    // (including NaN and infinities) across a tensor.
    for (uint32_t b = 0; b < t.nbytes; ++b) dst[b] = (uint8_t)((b * 37u + 11u + i * 101u) & 0xFFu);
  }
  uint8_t* external_out[espnn::xts3::kMaxGraphOutputs] = {};
  for (uint32_t i = 0; i < interp.num_outputs(); ++i) {
    const espnn::TensorInfo t = interp.output_info(i);
    if ((t.flags & espnn::xts3::kTensorFlagExternal) == 0) continue;
    // The caller's buffer, at its exact size so ASan catches a write past it.
    external_out[i] = (uint8_t*)AllocExact(t.nbytes);
    FUZZ_CHECK(interp.BindOutput(i, external_out[i], t.nbytes).ok());
  }
  g_allocs = 0;
  g_counting = 1;
  const espnn::Status s = interp.Invoke();
  g_counting = 0;
  FUZZ_CHECK(g_allocs == 0);
  // Validation is complete, so an accepted graph runs to the end.
  if (!s.ok()) {
    fprintf(stderr, "invoke failed on an accepted blob: %s\n", s.message());
    abort();
  }
  for (uint32_t i = 0; i < interp.num_outputs(); ++i) {
    const espnn::TensorInfo t = interp.output_info(i);
    const uint8_t* out = (const uint8_t*)interp.output_data(i);
    FUZZ_CHECK(external_out[i] != nullptr ? out == external_out[i]
                                          : out >= arena && out + t.nbytes <= arena + req.arena_bytes);
  }
  for (uint8_t* p : external_out) free(p);
  for (uint8_t* p : external) free(p);
  free(persistent);
  free(scratch);
  free(arena);
  return 0;
}
