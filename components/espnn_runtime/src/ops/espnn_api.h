// The one place the runtime includes ESP-NN. On the chip, esp_nn.h picks the
// optimized implementation from CONFIG_* macros but does not include
// sdkconfig.h itself: without it every kernel silently maps to ANSI C.
#pragma once

#ifdef ESP_PLATFORM
#include "sdkconfig.h"
#endif
#include "esp_nn.h"

namespace espnn {

// An ESP32-S3 build on ESP-NN's optimized kernels, some of which have
// defects that the ops route around (see conv.cpp, depthwise_conv.cpp).
#if defined(CONFIG_NN_OPTIMIZED) && defined(CONFIG_IDF_TARGET_ESP32S3)
constexpr bool kEspnnS3Optimized = true;
#else
constexpr bool kEspnnS3Optimized = false;
#endif

}  // namespace espnn
