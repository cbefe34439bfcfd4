#pragma once
#include "freertos/FreeRTOS.h"
#ifdef __cplusplus
extern "C" {
#endif
void vTaskDelay(const TickType_t xTicksToDelay);
#ifdef __cplusplus
}
#endif
