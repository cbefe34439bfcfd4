#pragma once
#include "freertos/FreeRTOS.h"
#ifdef __cplusplus
extern "C" {
#endif
void vTaskDelay(const TickType_t ticks);
#ifdef __cplusplus
}
#endif
