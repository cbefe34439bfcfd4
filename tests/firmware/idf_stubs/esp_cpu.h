#pragma once
#include <stdint.h>
typedef uint32_t esp_cpu_cycle_count_t;
#ifdef __cplusplus
extern "C" {
#endif
esp_cpu_cycle_count_t esp_cpu_get_cycle_count(void);
#ifdef __cplusplus
}
#endif
