#pragma once
#include <stdint.h>
#include "esp_err.h"
typedef enum { SOC_MOD_CLK_CPU = 1 } soc_module_clk_t;
typedef enum { ESP_CLK_TREE_SRC_FREQ_PRECISION_CACHED, ESP_CLK_TREE_SRC_FREQ_PRECISION_APPROX,
               ESP_CLK_TREE_SRC_FREQ_PRECISION_EXACT } esp_clk_tree_src_freq_precision_t;
#ifdef __cplusplus
extern "C" {
#endif
esp_err_t esp_clk_tree_src_get_freq_hz(soc_module_clk_t clk_src, esp_clk_tree_src_freq_precision_t precision,
                                       uint32_t* freq_value);
#ifdef __cplusplus
}
#endif
