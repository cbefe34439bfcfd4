#pragma once
#ifdef __cplusplus
extern "C" {
#endif
void esp_log_write(int level, const char* tag, const char* format, ...) __attribute__((format(printf, 3, 4)));
#ifdef __cplusplus
}
#endif
#define ESP_LOGE(tag, fmt, ...) esp_log_write(1, tag, fmt, ##__VA_ARGS__)
#define ESP_LOGW(tag, fmt, ...) esp_log_write(2, tag, fmt, ##__VA_ARGS__)
#define ESP_LOGI(tag, fmt, ...) esp_log_write(3, tag, fmt, ##__VA_ARGS__)
