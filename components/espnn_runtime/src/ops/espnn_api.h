// The one place the runtime includes ESP-NN. On the chip, esp_nn.h picks the
// optimized implementation from CONFIG_* macros but does not include
// sdkconfig.h itself: without it every kernel silently maps to ANSI C.
#pragma once

#ifdef ESP_PLATFORM
#include "sdkconfig.h"
#endif
#include "esp_nn.h"
