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

// Reads a file into a malloc block (not espnn_pal_malloc, so --alloc-limit
// counts only the runner); *data is `alignment`-aligned + misalign, as a
// flash mmap is aligned and an embedded file may not be. `alignment` is a
// power of two. Free *block with free().
inline bool ReadFile(const char* path, uintptr_t alignment, uint32_t misalign, void** block, uint8_t** data,
                     size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return false;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return false;
  }
  void* raw = malloc((size_t)n + misalign + alignment);
  uint8_t* d = raw ? (uint8_t*)(((uintptr_t)raw + alignment - 1) & ~(alignment - 1)) + misalign : nullptr;
  const bool ok = d != nullptr && fread(d, 1, (size_t)n, f) == (size_t)n;
  fclose(f);
  if (!ok) {
    free(raw);
    return false;
  }
  *block = raw;
  *data = d;
  *size = (size_t)n;
  return true;
}

}  // namespace stdio_shell
