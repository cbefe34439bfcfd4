// Test hooks of tests/firmware/stdio_pal.cpp (host and xtensa-sim PAL).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "espnn/platform.h"

extern "C" {
// Caps the bytes that espnn_pal_malloc lets be live at once.
void espnn_test_set_alloc_limit(size_t bytes);
// Hides PAL capabilities (e.g. the cycle counter, so that runs print no
// clock-dependent numbers and instruction counts are exactly repeatable).
void espnn_test_mask_caps(uint32_t mask);
// Preference passed to the last espnn_pal_malloc call.
espnn_mem_pref_t espnn_test_last_pref(void);
// Text and level of the last message that reached espnn_pal_log_sink.
const char* espnn_test_last_log(void);
espnn_log_level_t espnn_test_last_log_level(void);
}
