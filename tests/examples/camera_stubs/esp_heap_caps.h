#pragma once
#include <stddef.h>
#include <stdint.h>
#define MALLOC_CAP_SPIRAM (1 << 10)
#ifdef __cplusplus
extern "C" {
#endif
void* heap_caps_aligned_alloc(size_t alignment, size_t size, uint32_t caps);
#ifdef __cplusplus
}
#endif
