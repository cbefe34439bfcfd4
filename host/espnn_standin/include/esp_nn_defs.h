/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- parameter structures.
 *
 * This file belongs to the executorch-espnn project; it is NOT part of
 * ESP-NN.  It declares the structures that ESP-NN's C API passes around,
 * with the same type names and the same member order, so that code written
 * against ESP-NN compiles (and is ABI compatible) with either the real
 * library or the project's stand-in.  Semantics are described in
 * ESP-NN 1.2.3's esp_nn_defs.h (github.com/espressif/esp-nn).
 */
#ifndef EXECUTORCH_ESPNN_STANDIN_ESP_NN_DEFS_H
#define EXECUTORCH_ESPNN_STANDIN_ESP_NN_DEFS_H

#include <stdint.h>

/* Shape of one NHWC tensor holding a single image (batch 1).  For a conv
 * filter, `channels` is the number of input channels of one group.  `extra`
 * is carried along but read by no kernel. */
typedef struct data_dims {
    int32_t width;
    int32_t height;
    int32_t channels;
    int32_t extra;
} data_dims_t;

/* A (width, height) pair: stride, top/left padding or dilation. */
typedef struct data_2d {
    int32_t width;
    int32_t height;
} data_2d_t;

/* Output clamp, in the output's quantized domain (after the zero point). */
typedef struct act_params {
    int32_t min;
    int32_t max;
} act_params_t;

/* Requantization arrays, one entry per output channel.
 * Mind the order: the shift array comes first, then the multipliers. */
typedef struct quant_data {
    int32_t *shift;
    int32_t *mult;
} quant_data_t;

/* Convolution parameters.  in_offset = -input zero point,
 * out_offset = +output zero point; padding is the top/left pad only;
 * dilation is accepted but ignored by every kernel. */
typedef struct conv_params {
    int32_t in_offset;
    int32_t out_offset;
    data_2d_t stride;
    data_2d_t padding;
    data_2d_t dilation;
    act_params_t activation;
} conv_params_t;

/* Depthwise parameters: as conv_params_t plus the depth multiplier
 * (output channels = input channels * ch_mult), placed third. */
typedef struct dw_conv_params {
    int32_t in_offset;
    int32_t out_offset;
    int32_t ch_mult;
    data_2d_t stride;
    data_2d_t padding;
    data_2d_t dilation;
    act_params_t activation;
} dw_conv_params_t;

#endif /* EXECUTORCH_ESPNN_STANDIN_ESP_NN_DEFS_H */
