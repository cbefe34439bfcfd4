// xts3_tool: parses and runs XTS3 blobs outside Python, so the runtime can be
// exercised where the extension cannot be loaded: -m32 builds (where size_t
// is 32 bits, as on the ESP32), sanitizer builds, and emulated targets.
//
//   xts3_tool [--misalign=N] [--pte] FILE...
//   xts3_tool [--misalign=N] [--pte] -  (file names from stdin, one a line)
//
// For each FILE prints one line:
//   FILE\tREJECT\t<parser or init message>
//   FILE\tOK\tarena=<bytes>\tscratch=<bytes>\t<output hex>...
// A blob that parses is run once. Its inputs are read from FILE.in (the
// graph inputs' bytes concatenated) when that file exists; otherwise every
// input byte is (index * 37 + 11) mod 256. Outputs are printed as hex, one
// tab-separated field per graph output, so a test can compare them with the
// 64-bit host build. Exit status: 0 if every file was processed (accepted
// or rejected), 2 on a usage or I/O error, 3 if any Invoke touched the heap
// (reported on stderr; the runtime must allocate nothing while it runs).
//
// --pte: the files are ExecuTorch programs, given to the device's .pte check
// (espnn/pte_check.h) instead: FILE\tOK or FILE\tREJECT\t<message>.
//
// Each blob is copied into a heap block of exactly its size, so an
// AddressSanitizer build reports any read past its end. --misalign=N places
// the copy N bytes past a 16-byte boundary instead (to exercise the parser's
// alignment check; the Python binding always hands it an aligned copy).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "espnn/interpreter.h"
#include "espnn/model.h"
#include "espnn/pte_check.h"

// Heap use during Invoke is counted: the runtime promises to allocate
// nothing there. C allocations reach the counters through the linker's
// --wrap (see host/CMakeLists.txt), C++ ones through operator new below.
static volatile int g_count_allocs = 0;
static unsigned long g_allocs = 0;
static bool alloc_violations = false;

extern "C" {
void* __real_malloc(size_t n);
void* __real_calloc(size_t n, size_t size);
void* __real_realloc(void* p, size_t n);
void* __wrap_malloc(size_t n) {
  if (g_count_allocs) ++g_allocs;
  return __real_malloc(n);
}
void* __wrap_calloc(size_t n, size_t size) {
  if (g_count_allocs) ++g_allocs;
  return __real_calloc(n, size);
}
void* __wrap_realloc(void* p, size_t n) {
  if (g_count_allocs) ++g_allocs;
  return __real_realloc(p, n);
}
}

void* operator new(size_t n) {
  if (g_count_allocs) ++g_allocs;
  void* p = malloc(n ? n : 1);
  if (p == nullptr) abort();
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }

namespace {

// Bytes of the blob start this far past a 16-byte boundary (--misalign).
size_t g_misalign = 0;
// The files are .pte programs for CheckProgram (--pte).
bool g_pte = false;

// Reads a whole file into a heap block of exactly `misalign + size` bytes
// (at least 1) whose start is 16-byte aligned; *data = block + misalign.
// The caller frees *block.
bool ReadFile(const char* path, size_t misalign, unsigned char** block, unsigned char** data,
              size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return false;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (n < 0) {
    fclose(f);
    return false;
  }
  // posix_memalign, unlike aligned_alloc, takes any size: the block ends
  // exactly at the blob's last byte, so ASan sees even a 1-byte overread.
  void* raw = nullptr;
  size_t alloc = misalign + (size_t)n;
  if (posix_memalign(&raw, 16, alloc ? alloc : 1) != 0) raw = nullptr;
  unsigned char* buf = (unsigned char*)raw;
  if (buf == nullptr || fread(buf + misalign, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(buf);
    return false;
  }
  fclose(f);
  *block = buf;
  *data = buf + misalign;
  *size = (size_t)n;
  return true;
}

// 16-byte aligned block of exactly `bytes` (at least 1), or nullptr.
void* AllocAligned(size_t bytes) {
  void* p = nullptr;
  return posix_memalign(&p, 16, bytes ? bytes : 1) == 0 ? p : nullptr;
}

int ProcessFile(const char* path) {
  unsigned char* block = nullptr;
  unsigned char* blob = nullptr;
  size_t size = 0;
  if (!ReadFile(path, g_misalign, &block, &blob, &size)) {
    fprintf(stderr, "xts3_tool: cannot read %s\n", path);
    return 2;
  }
  if (g_pte) {
    const espnn::Status c = espnn::pte::CheckProgram(blob, size);
    if (c.ok()) printf("%s\tOK\n", path);
    else printf("%s\tREJECT\t%s\n", path, c.message());
    fflush(stdout);
    free(block);
    return 0;
  }
  espnn::Model model;
  espnn::Status s = espnn::ParseModel(blob, size, &model);
  if (!s.ok()) {
    printf("%s\tREJECT\t%s\n", path, s.message());
    fflush(stdout);
    free(block);
    return 0;
  }
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(model);
  void* arena = AllocAligned(req.arena_bytes);
  void* scratch = AllocAligned(req.scratch_bytes);
  void* persistent = AllocAligned(req.persistent_bytes);
  espnn::Interpreter interp;
  // Buffers of EXTERNAL inputs (first kMaxGraphInputs) and outputs (after).
  unsigned char* external[espnn::xts3::kMaxGraphInputs + espnn::xts3::kMaxGraphOutputs] = {};
  s = interp.Init(&model, arena, req.arena_bytes, scratch, req.scratch_bytes, persistent,
                  req.persistent_bytes);
  if (s.ok()) {
    char in_path[4096];
    snprintf(in_path, sizeof(in_path), "%s.in", path);
    unsigned char* in_block = nullptr;
    unsigned char* in_data = nullptr;
    size_t in_size = 0;
    size_t consumed = 0;
    bool have_inputs = ReadFile(in_path, 0, &in_block, &in_data, &in_size);
    for (uint32_t i = 0; i < interp.num_inputs(); ++i) {
      const espnn::TensorInfo t = interp.input_info(i);
      unsigned char* dst = (unsigned char*)interp.input_data(i);
      if (t.flags & espnn::xts3::kTensorFlagExternal) {  // caller's bytes, bound not copied
        dst = external[i] = (unsigned char*)malloc(t.nbytes);  // malloc: aligned for float
        if (dst == nullptr || !interp.BindInput(i, dst, t.nbytes).ok()) abort();
      }
      for (uint32_t b = 0; b < t.nbytes; ++b)
        dst[b] = have_inputs && consumed + b < in_size ? in_data[consumed + b]
                                                       : (unsigned char)((b * 37u + 11u) & 0xFFu);
      consumed += t.nbytes;
    }
    free(in_block);
    for (uint32_t i = 0; i < interp.num_outputs(); ++i) {
      const espnn::TensorInfo t = interp.output_info(i);
      if ((t.flags & espnn::xts3::kTensorFlagExternal) == 0) continue;
      // The caller's buffer for an EXTERNAL output (malloc: aligned for float).
      unsigned char* out = external[espnn::xts3::kMaxGraphInputs + i] = (unsigned char*)malloc(t.nbytes);
      if (out == nullptr || !interp.BindOutput(i, out, t.nbytes).ok()) abort();
    }
    g_allocs = 0;
    g_count_allocs = 1;
    s = interp.Invoke();
    g_count_allocs = 0;
    if (g_allocs != 0) {
      fprintf(stderr, "xts3_tool: %s: %lu heap allocations during invoke\n", path, g_allocs);
      alloc_violations = true;
    }
  }
  if (!s.ok()) {
    printf("%s\tREJECT\t%s\n", path, s.message());
  } else {
    printf("%s\tOK\tarena=%u\tscratch=%u", path, (unsigned)req.arena_bytes,
           (unsigned)req.scratch_bytes);
    for (uint32_t i = 0; i < interp.num_outputs(); ++i) {
      const espnn::TensorInfo t = interp.output_info(i);
      const unsigned char* out = (const unsigned char*)interp.output_data(i);
      putchar('\t');
      for (uint32_t b = 0; b < t.nbytes; ++b) printf("%02x", out[b]);
    }
    putchar('\n');
  }
  // One complete line per file even if a later file crashes the process,
  // so a test can name the blob that did.
  fflush(stdout);
  for (unsigned char* p : external) free(p);
  free(arena);
  free(scratch);
  free(persistent);
  free(block);
  return 0;
}

// File names from stdin, one a line (for corpora too large for argv).
int ProcessStdinList() {
  int rc = 0;
  char line[4096];
  while (fgets(line, sizeof(line), stdin) != nullptr) {
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] != '\n' && !feof(stdin)) {
      fprintf(stderr, "xts3_tool: file name longer than %zu bytes\n", sizeof(line) - 2);
      return 2;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    if (n == 0) continue;
    if (ProcessFile(line) != 0) rc = 2;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  if (first < argc && strncmp(argv[first], "--misalign=", 11) == 0) {
    char* end = nullptr;
    unsigned long v = strtoul(argv[first] + 11, &end, 10);
    if (end == argv[first] + 11 || *end != '\0' || v > 4096) {
      fprintf(stderr, "xts3_tool: bad %s\n", argv[first]);
      return 2;
    }
    g_misalign = (size_t)v;
    ++first;
  }
  if (first < argc && strcmp(argv[first], "--pte") == 0) {
    g_pte = true;
    ++first;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: xts3_tool [--misalign=N] [--pte] FILE... | -\n");
    return 2;
  }
  int rc = 0;
  for (int i = first; i < argc; ++i) {
    const int r = strcmp(argv[i], "-") == 0 ? ProcessStdinList() : ProcessFile(argv[i]);
    if (r != 0) rc = 2;
  }
  fflush(stdout);
  if (alloc_violations) rc = 3;
  return rc;
}
