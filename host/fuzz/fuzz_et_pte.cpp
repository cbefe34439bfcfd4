// libFuzzer target: whole ExecuTorch programs (.pte files), taken the way
// every loader of this project takes one (executorch_espnn.runtime, the CLI,
// pte_suite, main/'s board runner):
//
//   espnn::pte::CheckProgram -> Program::load(Verification::InternalConsistency)
//   -> for every method: method_meta and its input/output tensor metas,
//      load_method (EspNNBackend::init for each delegate)
//
// Not execute(): a corrupted program that loads can still abort inside
// ExecuTorch when run — its CPU kernels' argument unboxing and FreeCall
// ET_CHECK the type of every value an instruction names ("EValue is not a
// Tensor"), which no check before the loader can know without the operator
// schemas. An earlier version of this target that also executed found that
// in 90 s; docs/runtime.md (known limits) has the upstream report.
//
// Where fuzz_et_glue mutates one delegate payload handed straight to the
// glue, this target mutates everything ExecuTorch reads first: the program
// flatbuffer, its delegate entries, values, instructions, and the payloads
// inside (seeds: corpus/et_pte/, real lowered programs).
//
// The program lies in an exact-size, 16-byte aligned heap block (ExecuTorch
// needs that alignment). Findings (abort): a crash or sanitizer report (the
// glue, the runtime and the kernels are instrumented; libexecutorch.so and
// the wheel's CPU kernels are not, so inside them only a crash shows); an
// ExecuTorch log line that is not valid UTF-8 (the executorch wheel's Python
// binding aborts the process on one: tests/hardening/data/mutated-abort.pte); a
// rejection by CheckProgram without a one-line ASCII message.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include "espnn/executorch_backend.h"
#include "espnn/pte_check.h"
#include "fuzz_common.h"

namespace espnn_fuzz {
namespace {

namespace et = ::executorch::runtime;

// How deep the inputs got, printed at exit (docs/fuzzing.md records them):
// a campaign in which nearly every input is rejected up front would be a
// campaign of the check, not of ExecuTorch's loader.
struct Depth {
  unsigned long inputs = 0, checked = 0, programs = 0, attempts = 0, methods = 0;
} g_depth;
void PrintDepth() {
  fprintf(stderr,
          "fuzz_et_pte depth: inputs=%lu passed_check=%lu program_loaded=%lu load_method_called=%lu "
          "method_loaded=%lu\n",
          g_depth.inputs, g_depth.checked, g_depth.programs, g_depth.attempts, g_depth.methods);
}

// Limits that keep one execution in the millisecond range; a program over
// them is skipped, not a finding (the runtime's own limits are larger).
constexpr size_t kMethodPoolBytes = 1u << 20;   // method allocator (and the glue's arena)
constexpr size_t kTempPoolBytes = 256u << 10;
constexpr int64_t kMaxPlannedBytes = 1 << 20;   // all planned buffers of a method together
constexpr size_t kMaxPlannedBuffers = 8;

// Serves the program's bytes in place; every request is bounds-checked.
class BlockLoader final : public et::DataLoader {
 public:
  BlockLoader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  et::Result<et::FreeableBuffer> load(size_t offset, size_t size, const SegmentInfo&) const override {
    if (offset > size_ || size > size_ - offset) return et::Error::InvalidArgument;
    return et::FreeableBuffer(data_ + offset, size, static_cast<et::FreeableBuffer::FreeFn>(nullptr));
  }
  et::Result<size_t> size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

// Loads one method of a loaded program (not execute(): see the note at the top).
void RunMethod(const et::Program& program, const char* name) {
  et::Result<et::MethodMeta> meta = program.method_meta(name);
  if (!meta.ok()) return;
  // What executorch_espnn's CLI asks before running: the I/O metadata.
  for (size_t i = 0; i < meta->num_inputs(); ++i) (void)meta->input_tensor_meta(i);
  for (size_t i = 0; i < meta->num_outputs(); ++i) (void)meta->output_tensor_meta(i);

  const size_t n_planned = meta->num_memory_planned_buffers();
  if (n_planned > kMaxPlannedBuffers) return;
  uint8_t* planned_mem[kMaxPlannedBuffers] = {};
  et::Span<uint8_t> spans[kMaxPlannedBuffers];
  int64_t total = 0;
  bool fits = true;
  for (size_t i = 0; i < n_planned && fits; ++i) {
    et::Result<int64_t> n = meta->memory_planned_buffer_size(i);
    fits = n.ok() && *n >= 0 && *n <= kMaxPlannedBytes - total;
    if (!fits) break;
    total += *n;
    if (posix_memalign((void**)&planned_mem[i], 16, *n ? (size_t)*n : 1) != 0) abort();
    memset(planned_mem[i], 0, *n ? (size_t)*n : 1);
    spans[i] = et::Span<uint8_t>(planned_mem[i], (size_t)*n);
  }
  if (fits) {
    static uint8_t method_pool[kMethodPoolBytes] __attribute__((aligned(16)));
    static uint8_t temp_pool[kTempPoolBytes] __attribute__((aligned(16)));
    et::MemoryAllocator method_alloc((uint32_t)sizeof(method_pool), method_pool);
    et::MemoryAllocator temp_alloc((uint32_t)sizeof(temp_pool), temp_pool);
    et::HierarchicalAllocator planned({spans, n_planned});
    et::MemoryManager memory(&method_alloc, &planned, &temp_alloc);
    // Delegates are initialized here; the method (and with it every
    // delegate handle) is destroyed at the end of this scope.
    ++g_depth.attempts;
    if (program.load_method(name, &memory).ok()) ++g_depth.methods;
  }
  for (size_t i = 0; i < n_planned && i < kMaxPlannedBuffers; ++i) free(planned_mem[i]);
}

// Every program the check lets through is loaded, every method of it too.
void RunWholePte(const uint8_t* pte, size_t size) {
  // 1. The project's check, on the fuzzer's bytes (any alignment).
  ++g_depth.inputs;
  const espnn::Status checked = espnn::pte::CheckProgram(pte, size);
  if (!checked.ok()) {
    const char* msg = checked.message();
    FUZZ_CHECK(msg[0] != '\0' && strchr(msg, '\n') == nullptr);
    for (const char* c = msg; *c; ++c) FUZZ_CHECK(*c >= 0x20 && *c < 0x7F);
    return;
  }
  ++g_depth.checked;
  // 2. ExecuTorch's loader with its full verification, on an exact-size
  //    aligned copy (ExecuTorch requires alignof(max_align_t)).
  AlignedBlob block(pte, size);
  BlockLoader loader(block.data(), block.size());
  et::Result<et::Program> program = et::Program::load(&loader, et::Program::Verification::InternalConsistency);
  if (!program.ok()) return;
  ++g_depth.programs;
  for (size_t i = 0; i < program->num_methods(); ++i) {
    et::Result<const char*> name = program->get_method_name(i);
    if (name.ok()) RunMethod(program.get(), name.get());
  }
}

}  // namespace
}  // namespace espnn_fuzz

// ExecuTorch's log hook (weak in libexecutorch.so; the executable's
// definition wins): silent, but every line must be valid UTF-8, because the
// executorch wheel's Python binding decodes each one and aborts the process
// on one that is not (a backend id from a corrupted .pte, printed in
// "Backend ... is not registered", did that). strlen: the length argument is
// vsnprintf's, which exceeds a line ExecuTorch cut at its buffer size.
extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t, const char*, const char*,
                                        size_t, const char* message, size_t) {
  FUZZ_CHECK(espnn::pte::IsUtf8(message, strlen(message)));
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  executorch::runtime::runtime_init();
  FUZZ_CHECK(executorch::runtime::get_backend_class(espnn::et::kBackendName) != nullptr);
  atexit(espnn_fuzz::PrintDepth);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  espnn_fuzz::RunWholePte(data, size);
  return 0;
}
