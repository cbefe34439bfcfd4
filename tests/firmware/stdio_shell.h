// What the two stdio shells of the board runner (stdio_runner.cpp: bundle
// mode, also under xtensa-sim; pte_stdio_runner.cpp: .pte mode) share:
// their numeric option parsing and reading a test file into memory at a
// chosen alignment. Header-only, so every build of either shell has it
// without a change to its source list.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace stdio_shell {

// A decimal uint32_t option value; false if `s` is not one.
inline bool ParseU32(const char* s, uint32_t* out) {
  char* end = nullptr;
  const unsigned long v = strtoul(s, &end, 10);
  if (end == s || *end != '\0' || v > 0xFFFFFFFFul) return false;
  *out = (uint32_t)v;
  return true;
}

// A test file read into a malloc block (not espnn_pal_malloc, so
// --alloc-limit counts only the runner), its bytes `alignment`-aligned +
// misalign: a flash mmap is aligned, an embedded file may not be.
// `alignment` is a power of two. A file that cannot be read is reported on
// stderr as "<program>: cannot read <path>" (then ok() is false).
class TestFile {
 public:
  TestFile(const char* program, const char* path, uintptr_t alignment, uint32_t misalign) {
    if (!Read(path, alignment, misalign)) fprintf(stderr, "%s: cannot read %s\n", program, path);
  }
  ~TestFile() { free(block_); }
  TestFile(const TestFile&) = delete;
  TestFile& operator=(const TestFile&) = delete;

  bool ok() const { return data_ != nullptr; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  bool Read(const char* path, uintptr_t alignment, uint32_t misalign) {
    FILE* f = fopen(path, "rb");
    if (f == nullptr) return false;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
      fclose(f);
      return false;
    }
    block_ = malloc((size_t)n + misalign + alignment);
    uint8_t* d = block_ ? (uint8_t*)(((uintptr_t)block_ + alignment - 1) & ~(alignment - 1)) + misalign : nullptr;
    const bool read = d != nullptr && fread(d, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (!read) return false;
    data_ = d;
    size_ = (size_t)n;
    return true;
  }

  void* block_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace stdio_shell
