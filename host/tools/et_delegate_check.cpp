// et_delegate_check: proves on real .pte programs, through ExecuTorch's
// runtime (libexecutorch.so of the executorch wheel plus its CPU kernel
// libraries), that EspNNBackend::execute() allocates nothing, and checks
// the memory lifecycle of the delegate (tests/hardening/
// test_execute_allocates_nothing.py drives it).
//
//   et_delegate_check [--runs N] [--allocate-in-delegate] PTE...
//   et_delegate_check --payload XTS3_FILE
//
// Allocation counting: this executable defines malloc, calloc, realloc,
// free, posix_memalign, aligned_alloc and memalign (on glibc's __libc_*
// functions). A definition in the executable takes precedence over libc's
// for every shared library too, so allocations made inside libexecutorch.so,
// the kernel libraries and libstdc++ (operator new calls malloc) are counted;
// a self-check at start-up proves that (strdup allocates inside libc).
//
// Per program, after loading (init may allocate):
//   * traced: the method runs with an event tracer; ExecuTorch reports each
//     delegate call as a DELEGATE_CALL event, and allocations between its
//     start and end — i.e. inside EspNNBackend::execute — must be zero;
//   * untraced: allocations during the whole Method::execute() (delegates
//     and CPU kernels) are reported (execute_allocs), and must be zero
//     with --strict-execute (fully delegated programs);
//   * espnn_pal_malloc blocks (the heap memory source) are counted through
//     -Wl,--wrap; all must be freed once the method is destroyed.
// --allocate-in-delegate is the negative control: the tracer allocates in
// each per-op event the delegate emits, inside execute(), so the check fails.
//
// --payload: the processed-buffer rule of init() — a 16-byte aligned
// payload is used in place (not freed), one at an odd address is copied and
// the processed buffer freed (with ESPNN_WEIGHTS_COPY_* every payload is
// copied and freed); destroy() returns every heap block.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/runtime.h>

#include "espnn/executorch_backend.h"
#include "espnn/platform.h"
#include "et_pte_runner.h"

// ---------------------------------------------------------------- counting
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<int> g_counting{0};
std::atomic<unsigned long> g_allocs{0};
inline void Count() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  Count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  Count();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  Count();
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(size_t a, size_t n) {
  Count();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  Count();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  Count();
  if (a < sizeof(void*) || (a & (a - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

// espnn_pal_malloc/free (platform_host.cpp) as the glue calls them.
void* __real_espnn_pal_malloc(size_t, espnn_mem_pref_t);
void __real_espnn_pal_free(void*);
static long g_pal_allocs = 0, g_pal_live = 0;
void* __wrap_espnn_pal_malloc(size_t n, espnn_mem_pref_t pref) {
  void* p = __real_espnn_pal_malloc(n, pref);
  if (p != nullptr) ++g_pal_allocs, ++g_pal_live;
  return p;
}
void __wrap_espnn_pal_free(void* p) {
  if (p != nullptr) --g_pal_live;
  __real_espnn_pal_free(p);
}
}  // extern "C"

namespace {

using espnn_test::ProbeTracer;
using espnn_test::PteRunner;
namespace et = ::executorch::runtime;

struct Window {
  unsigned long calls = 0;
  unsigned long allocs = 0;
  unsigned long before = 0;
};
void OnDelegateCall(void* ctx, bool entering) {
  Window* w = static_cast<Window*>(ctx);
  if (entering) {
    ++w->calls;
    w->before = g_allocs.load();
    g_counting.store(1);
  } else {
    g_counting.store(0);
    w->allocs += g_allocs.load() - w->before;
  }
}

bool SelfCheck() {
  g_allocs = 0;
  g_counting = 1;
  int* i = new int(1);
  void* m = malloc(3);
  void* c = calloc(2, 2);
  c = realloc(c, 64);
  void* pm = nullptr;
  if (posix_memalign(&pm, 16, 8) != 0) pm = nullptr;
  void* aa = aligned_alloc(16, 16);
  char* s = strdup("inside libc");
  g_counting = 0;
  const unsigned long n = g_allocs;
  delete i;
  free(m);
  free(c);
  free(pm);
  free(aa);
  free(s);
  if (n != 7) {
    fprintf(stderr, "FAIL: allocation counting self-check saw %lu of 7 allocations\n", n);
    return false;
  }
  return true;
}

int CheckProgram(const char* path, int runs, bool allocate_in_delegate, bool strict_execute) {
  int failures = 0;
  const long pal_before = g_pal_live;
  unsigned long execute_allocs = 0;
  long pal_allocs = 0;
  {  // untraced: the whole Method::execute()
    PteRunner runner;
    const long pal_allocs_before = g_pal_allocs;
    std::string err = runner.Load(path);
    if (!err.empty()) {
      fprintf(stderr, "FAIL: %s\n", err.c_str());
      return 1;
    }
    pal_allocs = g_pal_allocs - pal_allocs_before;
    for (int r = 0; r < runs; ++r) {
      if (runner.SetInputs() != et::Error::Ok) {
        fprintf(stderr, "FAIL: %s: set_input failed\n", path);
        return 1;
      }
      const unsigned long before = g_allocs;
      g_counting = 1;
      const et::Error e = runner.Execute();
      g_counting = 0;
      execute_allocs += g_allocs - before;
      if (e != et::Error::Ok) {
        fprintf(stderr, "FAIL: %s: execute returned 0x%x\n", path, (unsigned)e);
        return 1;
      }
    }
  }
  const long pal_live_after_destroy = g_pal_live - pal_before;
  Window window;
  unsigned long op_events = 0;
  {  // traced: the delegate calls only
    ProbeTracer tracer(OnDelegateCall, &window);
    tracer.set_allocate_in_delegate(allocate_in_delegate);
    PteRunner runner;
    std::string err = runner.Load(path, &tracer);
    if (!err.empty()) {
      fprintf(stderr, "FAIL: %s\n", err.c_str());
      return 1;
    }
    for (int r = 0; r < runs; ++r) {
      const et::Error e = runner.SetInputs() == et::Error::Ok ? runner.Execute() : et::Error::InvalidState;
      if (e != et::Error::Ok) {
        fprintf(stderr, "FAIL: %s: traced execute returned 0x%x\n", path, (unsigned)e);
        return 1;
      }
    }
    op_events = tracer.delegate_events();
  }
  printf("program %s: runs=%d delegate_calls=%lu delegate_op_events=%lu delegate_window_allocs=%lu "
         "execute_allocs=%lu pal_allocs_at_load=%ld pal_live_after_destroy=%ld\n",
         path, runs, window.calls, op_events, window.allocs, execute_allocs, pal_allocs,
         pal_live_after_destroy);
  if (window.calls == 0 || op_events == 0) {
    fprintf(stderr, "FAIL: %s: no delegate call was observed (the check would be vacuous)\n", path);
    ++failures;
  }
  if (window.allocs != 0) {
    fprintf(stderr, "FAIL: %s: %lu heap allocations inside EspNNBackend::execute\n", path, window.allocs);
    ++failures;
  }
  if (strict_execute && execute_allocs != 0) {
    fprintf(stderr, "FAIL: %s: %lu heap allocations during Method::execute\n", path, execute_allocs);
    ++failures;
  }
  if (pal_live_after_destroy != 0) {
    fprintf(stderr, "FAIL: %s: %ld espnn_pal_malloc blocks not freed by destroy()\n", path,
            pal_live_after_destroy);
    ++failures;
  }
  return failures;
}

// Built with the glue's ESPNN_WEIGHTS_COPY_* (et_delegate_check_copy): init
// copies every payload to RAM, so the processed buffer is always freed.
#ifdef ESPNN_CHECK_WEIGHTS_COPIED
constexpr bool kWeightsCopied = true;
#else
constexpr bool kWeightsCopied = false;
#endif

struct FreeRecord {
  bool freed = false;
};
void RecordFree(void* ctx, void*, size_t) { static_cast<FreeRecord*>(ctx)->freed = true; }

int CheckPayload(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) {
    fprintf(stderr, "FAIL: cannot open %s\n", path);
    return 1;
  }
  std::vector<uint8_t> bytes;
  for (int c; (c = fgetc(f)) != EOF;) bytes.push_back((uint8_t)c);
  fclose(f);
  et::BackendInterface* backend = et::get_backend_class(espnn::et::kBackendName);
  int failures = 0;
  for (size_t offset : {0u, 1u}) {
    std::vector<uint8_t> pool(4u << 20), buffer(bytes.size() + 32);
    uint8_t* at = buffer.data() + (16 - reinterpret_cast<uintptr_t>(buffer.data()) % 16) % 16 + offset;
    memcpy(at, bytes.data(), bytes.size());
    FreeRecord record;
    et::FreeableBuffer processed(at, bytes.size(), RecordFree, &record);
    et::MemoryAllocator allocator((uint32_t)pool.size(), pool.data());
    et::BackendInitContext ctx(&allocator);
    const long live_before = g_pal_live;
    auto handle = backend->init(ctx, &processed, {});
    if (!handle.ok()) {
      fprintf(stderr, "FAIL: init of %s returned 0x%x\n", path, (unsigned)handle.error());
      return 1;
    }
    const long live_after_init = g_pal_live - live_before;
    const bool freed_at_init = record.freed;
    backend->destroy(handle.get());
    const long live_after_destroy = g_pal_live - live_before;
    printf("payload %s offset=%zu: processed_freed=%d pal_live_after_init=%ld "
           "pal_live_after_destroy=%ld runtime_allocator_used=%zu\n",
           path, offset, (int)freed_at_init, live_after_init, live_after_destroy,
           (size_t)allocator.used_size());
    if (freed_at_init != (kWeightsCopied || offset != 0)) {
      fprintf(stderr, "FAIL: payload at offset %zu: processed buffer %s\n", offset,
              freed_at_init ? "freed although the model reads its constants from it"
                            : "kept although init copied it");
      ++failures;
    }
    if (live_after_destroy != 0) {
      fprintf(stderr, "FAIL: %ld espnn_pal_malloc blocks left after destroy()\n", live_after_destroy);
      ++failures;
    }
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (!SelfCheck()) return 2;
  et::runtime_init();
  if (et::get_backend_class(espnn::et::kBackendName) == nullptr) {
    fprintf(stderr, "FAIL: EspNNBackend is not registered\n");
    return 2;
  }
  int runs = 3, failures = 0, programs = 0;
  bool allocate_in_delegate = false, strict_execute = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--allocate-in-delegate")) {
      allocate_in_delegate = true;
    } else if (!strcmp(argv[i], "--strict-execute")) {
      strict_execute = true;
    } else if (!strcmp(argv[i], "--payload") && i + 1 < argc) {
      failures += CheckPayload(argv[++i]);
      ++programs;
    } else {
      failures += CheckProgram(argv[i], runs, allocate_in_delegate, strict_execute);
      ++programs;
    }
  }
  if (programs == 0) {
    fprintf(stderr, "usage: et_delegate_check [--runs N] [--strict-execute] [--allocate-in-delegate] "
                    "PTE... | --payload XTS3\n");
    return 2;
  }
  printf("%s: %d check(s) failed\n", failures ? "FAIL" : "OK", failures);
  return failures ? 1 : 0;
}
