// lifecycle_check: parse / init / invoke / destroy cycles under
// AddressSanitizer + LeakSanitizer (tests/hardening/test_lifecycle_lsan.py).
//
//   lifecycle_check [--cycles=N] [--leak] FILE...
//
// For every blob the parser accepts, N times over: a fresh Interpreter is
// initialized on freshly allocated arena and scratch, run, and torn down
// (buffers freed); one long-lived Interpreter is also re-initialized with
// every model in turn (re-init must fully replace the previous state). Init
// must refuse a too-small or misaligned arena and leave the interpreter
// uninitialized. Outputs of every run of a blob must be identical.
//
// The runtime promises to allocate nothing at all: the sanitizer
// allocator's hooks count allocations inside ParseModel,
// ComputeMemoryRequirements, Init and Invoke, and any is an error. What is
// allocated here is the harness's, the way a device application would hold
// it; LeakSanitizer, at exit, proves every cycle gives it all back. --leak
// deliberately keeps one arena (the negative control that shows the leak
// check is live).
//
// Exit status: 0 ok, 1 a check failed (message on stderr), 2 usage/I/O.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"

// From the sanitizer runtimes (declared here: gcc installs no
// <sanitizer/allocator_interface.h>). Hooks run on every malloc/free.
extern "C" int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, size_t), void (*free_hook)(const volatile void*));

namespace {

// Per thread: libFuzzer's own threads (its RSS monitor) allocate at any
// time, and only this thread's allocations are the runtime's.
thread_local int g_counting = 0;
thread_local unsigned long g_allocs = 0;
void OnMalloc(const volatile void*, size_t) {
  if (g_counting) ++g_allocs;
}
void OnFree(const volatile void*) {}

int g_failures = 0;
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "lifecycle_check: " __VA_ARGS__);   \
      fputc('\n', stderr);                                \
      ++g_failures;                                       \
    }                                                     \
  } while (0)

// Runs `fn` with allocation counting on; returns the number of allocations.
template <typename F>
unsigned long Counted(F fn) {
  g_allocs = 0;
  g_counting = 1;
  fn();
  g_counting = 0;
  return g_allocs;
}

void* AllocAligned(size_t n) {
  void* p = nullptr;
  return posix_memalign(&p, 16, n ? n : 1) == 0 ? p : nullptr;
}

bool ReadFile(const char* path, uint8_t** data, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return false;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = n >= 0 ? (uint8_t*)AllocAligned((size_t)n) : nullptr;
  bool ok = *data && fread(*data, 1, (size_t)n, f) == (size_t)n;
  fclose(f);
  if (!ok) free(*data);
  *size = (size_t)n;
  return ok;
}

// FNV-1a over every graph output.
uint64_t HashOutputs(const espnn::Interpreter& it) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t i = 0; i < it.num_outputs(); ++i) {
    const uint8_t* p = (const uint8_t*)it.output_data(i);
    for (uint32_t b = 0; b < it.output_info(i).nbytes; ++b) h = (h ^ p[b]) * 1099511628211ull;
  }
  return h;
}

// Buffers of EXTERNAL inputs (first kMaxGraphInputs) and outputs (after).
constexpr uint32_t kExternalSlots = espnn::xts3::kMaxGraphInputs + espnn::xts3::kMaxGraphOutputs;

// EXTERNAL inputs and outputs are bound to buffers put in `external`
// (freed by the caller).
void FillInputs(espnn::Interpreter& it, uint8_t** external) {
  for (uint32_t i = 0; i < it.num_inputs(); ++i) {
    uint8_t* p = (uint8_t*)it.input_data(i);
    if (it.input_info(i).flags & espnn::xts3::kTensorFlagExternal) {
      p = external[i] = (uint8_t*)AllocAligned(it.input_info(i).nbytes);
      CHECK(it.BindInput(i, p, it.input_info(i).nbytes).ok(), "bind input %u", (unsigned)i);
    }
    for (uint32_t b = 0; b < it.input_info(i).nbytes; ++b) p[b] = (uint8_t)((b * 37u + 11u + i) & 0xFF);
  }
  for (uint32_t i = 0; i < it.num_outputs(); ++i) {
    if ((it.output_info(i).flags & espnn::xts3::kTensorFlagExternal) == 0) continue;
    uint8_t* p = external[espnn::xts3::kMaxGraphInputs + i] = (uint8_t*)AllocAligned(it.output_info(i).nbytes);
    CHECK(it.BindOutput(i, p, it.output_info(i).nbytes).ok(), "bind output %u", (unsigned)i);
  }
}

// One init/invoke on `it` with fresh buffers that are freed afterwards
// (unless `leak`). Returns the outputs' hash.
uint64_t RunOnce(const char* path, const espnn::Model& m, espnn::Interpreter* it, bool leak) {
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(m);
  uint8_t* arena = (uint8_t*)AllocAligned(req.arena_bytes);
  uint8_t* scratch = (uint8_t*)AllocAligned(req.scratch_bytes);
  uint8_t* persistent = (uint8_t*)AllocAligned(req.persistent_bytes);
  espnn::Status s;
  unsigned long n = Counted([&] {
    s = it->Init(&m, arena, req.arena_bytes, scratch, req.scratch_bytes, persistent, req.persistent_bytes);
  });
  CHECK(s.ok(), "%s: init: %s", path, s.message());
  CHECK(n == 0, "%s: %lu allocations in Init", path, n);
  uint64_t h = 0;
  uint8_t* external[kExternalSlots] = {};
  if (s.ok()) {
    FillInputs(*it, external);
    n = Counted([&] { s = it->Invoke(); });
    CHECK(s.ok(), "%s: invoke: %s", path, s.message());
    CHECK(n == 0, "%s: %lu allocations in Invoke", path, n);
    h = HashOutputs(*it);
  }
  if (!leak) {
    free(arena);
    free(scratch);
    free(persistent);
    for (uint8_t* p : external) free(p);
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  __sanitizer_install_malloc_and_free_hooks(OnMalloc, OnFree);
  {  // The counting must be live, or every "0 allocations" below is vacuous.
    void* (*volatile alloc)(size_t) = malloc;
    void* p = nullptr;
    const unsigned long n = Counted([&] { p = alloc(8); });
    free(p);
    if (n != 1) {
      fprintf(stderr, "lifecycle_check: allocation hooks are not active (counted %lu)\n", n);
      return 1;
    }
  }
  int cycles = 3;
  bool leak = false;
  int first = 1;
  for (; first < argc && strncmp(argv[first], "--", 2) == 0; ++first) {
    if (strncmp(argv[first], "--cycles=", 9) == 0) cycles = atoi(argv[first] + 9);
    else if (strcmp(argv[first], "--leak") == 0) leak = true;
    else {
      fprintf(stderr, "usage: lifecycle_check [--cycles=N] [--leak] FILE...\n");
      return 2;
    }
  }
  if (first >= argc || cycles < 1) {
    fprintf(stderr, "usage: lifecycle_check [--cycles=N] [--leak] FILE...\n");
    return 2;
  }
  espnn::Interpreter shared;  // re-initialized with every model in turn
  int accepted = 0;
  for (int a = first; a < argc; ++a) {
    uint8_t* blob = nullptr;
    size_t size = 0;
    if (!ReadFile(argv[a], &blob, &size)) {
      fprintf(stderr, "lifecycle_check: cannot read %s\n", argv[a]);
      return 2;
    }
    espnn::Model m;
    espnn::Status s;
    unsigned long n = Counted([&] { s = espnn::ParseModel(blob, size, &m); });
    CHECK(n == 0, "%s: %lu allocations in ParseModel", argv[a], n);
    if (s.ok()) {
      ++accepted;
      n = Counted([&] { (void)espnn::ComputeMemoryRequirements(m); });
      CHECK(n == 0, "%s: %lu allocations in ComputeMemoryRequirements", argv[a], n);
      const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(m);
      // Init refuses bad buffers and leaves the interpreter uninitialized.
      {
        espnn::Interpreter it;
        uint8_t* arena = (uint8_t*)AllocAligned(req.arena_bytes + 16);
        uint8_t* scratch = (uint8_t*)AllocAligned(req.scratch_bytes);
        if (req.arena_bytes >= 16) {
          s = it.Init(&m, arena, req.arena_bytes - 16, scratch, req.scratch_bytes);
          CHECK(!s.ok() && !it.initialized(), "%s: init accepted a too-small arena", argv[a]);
          s = it.Init(&m, arena + 1, req.arena_bytes, scratch, req.scratch_bytes);
          CHECK(!s.ok() && !it.initialized(), "%s: init accepted a misaligned arena", argv[a]);
          CHECK(it.Invoke().code() == espnn::StatusCode::kNotInitialized,
                "%s: invoke after a failed init did not say 'not initialized'", argv[a]);
        }
        free(arena);
        free(scratch);
      }
      // Nor too little room for the fused regions' descriptions.
      if (req.persistent_bytes > 0) {
        espnn::Interpreter it;
        uint8_t* arena = (uint8_t*)AllocAligned(req.arena_bytes);
        uint8_t* scratch = (uint8_t*)AllocAligned(req.scratch_bytes);
        uint8_t* persistent = (uint8_t*)AllocAligned(req.persistent_bytes);
        s = it.Init(&m, arena, req.arena_bytes, scratch, req.scratch_bytes, persistent,
                    req.persistent_bytes - 1);
        CHECK(!s.ok() && !it.initialized(), "%s: init accepted too little persistent memory", argv[a]);
        s = it.Init(&m, arena, req.arena_bytes, scratch, req.scratch_bytes);
        CHECK(!s.ok() && !it.initialized(), "%s: init accepted no persistent memory", argv[a]);
        free(arena);
        free(scratch);
        free(persistent);
      }
      uint64_t want = 0;
      for (int c = 0; c < cycles; ++c) {
        espnn::Interpreter fresh;
        const uint64_t h = RunOnce(argv[a], m, &fresh, leak && a == first && c == 0);
        if (c == 0) want = h;
        CHECK(h == want, "%s: cycle %d gave other outputs", argv[a], c);
        CHECK(RunOnce(argv[a], m, &shared, false) == want, "%s: re-initialized interpreter gave other outputs",
              argv[a]);
      }
    }
    free(blob);
  }
  printf("lifecycle_check: %d files, %d accepted, %d cycles each, %d failures\n", argc - first, accepted, cycles,
         g_failures);
  return g_failures ? 1 : 0;
}
