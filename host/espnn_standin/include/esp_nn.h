/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3's ANSI C API.
 *
 * THIS IS NOT ESP-NN.  It is the executorch-espnn project's own
 * implementation of the API that Espressif's ESP-NN exposes when it is built
 * without CONFIG_NN_OPTIMIZED (the "ANSI C" build).  The host build uses it
 * when the real ESP-NN sources are not available (e.g. offline CI).  The
 * function names, argument lists and structure layouts are those of ESP-NN
 * 1.2.3 so that the same calling code compiles against either; the
 * arithmetic is written from the documented semantics
 * (ESP-NN 1.2.3 sources and docs, github.com/espressif/esp-nn; TFLite's
 * reference integer kernels) and is checked bit for bit against
 * golden vectors produced by the real ESP-NN 1.2.3 ANSI kernels.
 *
 * As in ESP-NN's ANSI build, the generic names (esp_nn_conv_s8, ...) are
 * preprocessor macros that expand to the *_ansi symbols.
 */
#ifndef EXECUTORCH_ESPNN_STANDIN_ESP_NN_H
#define EXECUTORCH_ESPNN_STANDIN_ESP_NN_H

#include <stdint.h>

#include "esp_nn_defs.h"

/* Lets callers (e.g. the Python binding) tell the stand-in from ESP-NN. */
#define ESPNN_STANDIN 1
/* The ESP-NN release whose ANSI behaviour this stand-in reproduces. */
#define ESPNN_STANDIN_VERSION "1.2.3"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- element-wise arithmetic ------------------------------------------ */

void esp_nn_add_elementwise_s8_ansi(const int8_t *input1_data,
                                    const int8_t *input2_data,
                                    const int32_t input1_offset,
                                    const int32_t input2_offset,
                                    const int32_t input1_mult,
                                    const int32_t input2_mult,
                                    const int32_t input1_shift,
                                    const int32_t input2_shift,
                                    const int32_t left_shift,
                                    int8_t *output,
                                    const int32_t out_offset,
                                    const int32_t out_mult,
                                    const int32_t out_shift,
                                    const int32_t activation_min,
                                    const int32_t activation_max,
                                    const int32_t size);

void esp_nn_mul_elementwise_s8_ansi(const int8_t *input1_data,
                                    const int8_t *input2_data,
                                    const int32_t input1_offset,
                                    const int32_t input2_offset,
                                    int8_t *output,
                                    const int32_t out_offset,
                                    const int32_t out_mult,
                                    const int32_t out_shift,
                                    const int32_t activation_min,
                                    const int32_t activation_max,
                                    const int32_t size);

void esp_nn_mul_broadcast_channel_s8_ansi(const int8_t *input1,
                                          const int8_t *input2_per_ch,
                                          const int32_t input1_offset,
                                          const int32_t input2_offset,
                                          int8_t *output,
                                          const int32_t output_offset,
                                          const int32_t output_mult,
                                          const int32_t output_shift,
                                          const int32_t activation_min,
                                          const int32_t activation_max,
                                          const int32_t total_spatial,
                                          const int32_t channels);

/* ---- convolutions ------------------------------------------------------ */

void esp_nn_depthwise_conv_s8_ansi(const data_dims_t *input_dims,
                                   const int8_t *input_data,
                                   const data_dims_t *filter_dims,
                                   const int8_t *filter_data,
                                   const int32_t *bias,
                                   const data_dims_t *output_dims,
                                   int8_t *out_data,
                                   const dw_conv_params_t *conv_params,
                                   const quant_data_t *quant_data);

void esp_nn_conv_s8_ansi(const data_dims_t *input_dims,
                         const int8_t *input_data,
                         const data_dims_t *filter_dims,
                         const int8_t *filter_data,
                         const int32_t *bias,
                         const data_dims_t *output_dims,
                         int8_t *out_data,
                         const conv_params_t *conv_params,
                         const quant_data_t *quant_data);

int esp_nn_get_conv_scratch_size_ansi(const data_dims_t *input_dims,
                                      const data_dims_t *filter_dims,
                                      const data_dims_t *output_dims,
                                      const conv_params_t *conv_params);
void esp_nn_set_conv_scratch_buf_ansi(const void *buf);

int esp_nn_get_depthwise_conv_scratch_size_ansi(const data_dims_t *input_dims,
                                                const data_dims_t *filter_dims,
                                                const data_dims_t *output_dims,
                                                const dw_conv_params_t *conv_params);
void esp_nn_set_depthwise_conv_scratch_buf_ansi(const void *buf);

/* ---- activations and reductions ---------------------------------------- */

void esp_nn_relu6_s8_ansi(int8_t *data, uint16_t size);

void esp_nn_hard_swish_s8_ansi(const int8_t *input, int8_t *output,
                               const int32_t size,
                               const int16_t input_zero_point,
                               const int16_t output_mult_fxp,
                               const int16_t reluish_mult_fxp,
                               const int32_t reluish_mult_exp,
                               const int32_t output_mult_exp,
                               const int16_t output_zero_point);

void esp_nn_mean_nhwc_s8_ansi(const int8_t *input, int8_t *output,
                              const int32_t height, const int32_t width,
                              const int32_t channels,
                              const int32_t input_zero_point,
                              const int32_t output_zero_point,
                              const int32_t multiplier,
                              const int32_t shift);

/* ---- pooling ------------------------------------------------------------ */

void esp_nn_max_pool_s8_ansi(const int8_t *input,
                             const uint16_t input_wd,
                             const uint16_t input_ht,
                             int8_t *output,
                             const uint16_t output_wd,
                             const uint16_t output_ht,
                             const uint16_t stride_wd,
                             const uint16_t stride_ht,
                             const uint16_t filter_wd,
                             const uint16_t filter_ht,
                             const uint16_t pad_wd,
                             const uint16_t pad_ht,
                             const int32_t activation_min,
                             const int32_t activation_max,
                             const uint16_t channels);

void esp_nn_avg_pool_s8_ansi(const int8_t *input,
                             const uint16_t input_wd,
                             const uint16_t input_ht,
                             int8_t *output,
                             const uint16_t output_wd,
                             const uint16_t output_ht,
                             const uint16_t stride_wd,
                             const uint16_t stride_ht,
                             const uint16_t filter_wd,
                             const uint16_t filter_ht,
                             const uint16_t pad_wd,
                             const uint16_t pad_ht,
                             const int32_t activation_min,
                             const int32_t activation_max,
                             const uint16_t channels);

/* ---- fully connected ---------------------------------------------------- */

/* Note the argument order: shift before mult. */
void esp_nn_fully_connected_s8_ansi(const int8_t *input_data,
                                    const int32_t input_offset,
                                    const uint16_t row_len,
                                    const int8_t *filter_data,
                                    const int32_t filter_offset,
                                    const int32_t *bias,
                                    int8_t *out_data,
                                    const uint16_t out_channels,
                                    const int32_t out_offset,
                                    const int32_t out_shift,
                                    const int32_t out_mult,
                                    const int32_t activation_min,
                                    const int32_t activation_max);

void esp_nn_fully_connected_per_ch_s8_ansi(const int8_t *input_data,
                                           const int32_t input_offset,
                                           const uint16_t row_len,
                                           const int8_t *filter_data,
                                           const int32_t filter_offset,
                                           const int32_t *bias,
                                           int8_t *out_data,
                                           const uint16_t out_channels,
                                           const int32_t out_offset,
                                           const int32_t *out_shift,
                                           const int32_t *out_mult,
                                           const int32_t activation_min,
                                           const int32_t activation_max);

/* ---- softmax ------------------------------------------------------------ */

int32_t esp_nn_get_softmax_scratch_size_ansi(const int32_t width, const int32_t height);
void esp_nn_set_softmax_scratch_buf_ansi(void *buffer);
void esp_nn_softmax_s8_ansi(const int8_t *input_data,
                            const int32_t height,
                            const int32_t width,
                            const int32_t mult,
                            const int32_t shift,
                            const int32_t diff_min,
                            int8_t *output_data);

/* ---- logistic (float-built lookup table) -------------------------------- */

int32_t esp_nn_get_logistic_s8_scratch_size_ansi(void);
void esp_nn_logistic_s8_prepare_ansi(int8_t *scratch_buf,
                                     int32_t input_zero_point,
                                     float input_scale);
void esp_nn_logistic_s8_ansi(const int8_t *input, int8_t *output,
                             int32_t size, const int8_t *scratch_buf);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ---- generic names, mapped as in ESP-NN's ANSI C build ------------------ */

#define esp_nn_add_elementwise_s8 esp_nn_add_elementwise_s8_ansi
#define esp_nn_mul_elementwise_s8 esp_nn_mul_elementwise_s8_ansi
#define esp_nn_mul_broadcast_channel_s8 esp_nn_mul_broadcast_channel_s8_ansi

#define esp_nn_depthwise_conv_s8 esp_nn_depthwise_conv_s8_ansi
#define esp_nn_conv_s8 esp_nn_conv_s8_ansi

#define esp_nn_get_conv_scratch_size esp_nn_get_conv_scratch_size_ansi
#define esp_nn_set_conv_scratch_buf esp_nn_set_conv_scratch_buf_ansi
#define esp_nn_get_depthwise_conv_scratch_size esp_nn_get_depthwise_conv_scratch_size_ansi
#define esp_nn_set_depthwise_conv_scratch_buf esp_nn_set_depthwise_conv_scratch_buf_ansi

#define esp_nn_relu6_s8 esp_nn_relu6_s8_ansi
#define esp_nn_hard_swish_s8 esp_nn_hard_swish_s8_ansi
/* The ANSI hard-swish needs no scratch: size 0, and setting one does
 * nothing (the argument is not evaluated). */
#define esp_nn_get_hard_swish_scratch_size() 0
#define esp_nn_set_hard_swish_scratch_buf(buf)
#define esp_nn_mean_nhwc_s8 esp_nn_mean_nhwc_s8_ansi

#define esp_nn_avg_pool_s8 esp_nn_avg_pool_s8_ansi
#define esp_nn_max_pool_s8 esp_nn_max_pool_s8_ansi

#define esp_nn_fully_connected_s8 esp_nn_fully_connected_s8_ansi
#define esp_nn_fully_connected_per_ch_s8 esp_nn_fully_connected_per_ch_s8_ansi

#define esp_nn_get_softmax_scratch_size esp_nn_get_softmax_scratch_size_ansi
#define esp_nn_set_softmax_scratch_buf esp_nn_set_softmax_scratch_buf_ansi
#define esp_nn_softmax_s8 esp_nn_softmax_s8_ansi

#define esp_nn_get_logistic_s8_scratch_size esp_nn_get_logistic_s8_scratch_size_ansi
#define esp_nn_logistic_s8_prepare esp_nn_logistic_s8_prepare_ansi
#define esp_nn_logistic_s8 esp_nn_logistic_s8_ansi

#endif /* EXECUTORCH_ESPNN_STANDIN_ESP_NN_H */
