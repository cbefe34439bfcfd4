// xts3_tool: parses and runs XTS3 blobs outside Python, so the runtime can be
// exercised where the extension cannot be loaded: -m32 builds (where size_t
// is 32 bits, as on the ESP32), sanitizer builds, and emulated targets.
//
//   xts3_tool FILE...
//
// For each FILE prints one line:
//   FILE\tREJECT\t<parser or init message>
//   FILE\tOK\tarena=<bytes>\tscratch=<bytes>\t<output hex>...
// A blob that parses is run once. Its inputs are read from FILE.in (the
// graph inputs' bytes concatenated) when that file exists; otherwise every
// input byte is (index * 37 + 11) mod 256. Outputs are printed as hex, one
// tab-separated field per graph output, so a test can compare them with the
// 64-bit host build. Exit status: 0 if every file was processed (accepted
// or rejected), 2 on a usage or I/O error.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "espnn/interpreter.h"
#include "espnn/model.h"

namespace {

bool ReadFile(const char* path, unsigned char** data, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return false;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (n < 0) {
    fclose(f);
    return false;
  }
  // 16-byte aligned copy, exactly n bytes long so ASan sees any overread.
  size_t alloc = ((size_t)n + 15u) & ~(size_t)15u;
  unsigned char* buf = (unsigned char*)aligned_alloc(16, alloc ? alloc : 16);
  if (buf == nullptr || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(buf);
    return false;
  }
  fclose(f);
  *data = buf;
  *size = (size_t)n;
  return true;
}

void* AllocAligned(size_t bytes) {
  size_t alloc = (bytes + 15u) & ~(size_t)15u;
  return aligned_alloc(16, alloc ? alloc : 16);
}

int ProcessFile(const char* path) {
  unsigned char* blob = nullptr;
  size_t size = 0;
  if (!ReadFile(path, &blob, &size)) {
    fprintf(stderr, "xts3_tool: cannot read %s\n", path);
    return 2;
  }
  espnn::Model model;
  espnn::Status s = espnn::ParseModel(blob, size, &model);
  if (!s.ok()) {
    printf("%s\tREJECT\t%s\n", path, s.message());
    free(blob);
    return 0;
  }
  const espnn::MemoryRequirements req = espnn::ComputeMemoryRequirements(model);
  void* arena = AllocAligned(req.arena_bytes);
  void* scratch = AllocAligned(req.scratch_bytes);
  espnn::Interpreter interp;
  s = interp.Init(&model, arena, req.arena_bytes, scratch, req.scratch_bytes);
  if (s.ok()) {
    char in_path[4096];
    snprintf(in_path, sizeof(in_path), "%s.in", path);
    unsigned char* in_data = nullptr;
    size_t in_size = 0;
    size_t consumed = 0;
    bool have_inputs = ReadFile(in_path, &in_data, &in_size);
    for (uint32_t i = 0; i < interp.num_inputs(); ++i) {
      const espnn::TensorInfo t = interp.input_info(i);
      unsigned char* dst = (unsigned char*)interp.input_data(i);
      for (uint32_t b = 0; b < t.nbytes; ++b)
        dst[b] = have_inputs && consumed + b < in_size ? in_data[consumed + b]
                                                       : (unsigned char)((b * 37u + 11u) & 0xFFu);
      consumed += t.nbytes;
    }
    free(in_data);
    s = interp.Invoke();
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
  free(arena);
  free(scratch);
  free(blob);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: xts3_tool FILE...\n");
    return 2;
  }
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    if (ProcessFile(argv[i]) != 0) rc = 2;
  }
  return rc;
}
