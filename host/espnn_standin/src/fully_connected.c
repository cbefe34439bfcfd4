/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- fully connected.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * One input row per call.  filter is [out_channels][row_len], row-major.
 * acc = sum((w + filter_offset) * (x + input_offset)) + bias[o], requantized
 * with one (shift, mult) pair or with per-output-channel arrays.
 */
#include "esp_nn.h"
#include "standin_arith.h"

/* Wrapping int32 dot product of one filter row with the input row. */
static int32_t fc_dot(const int8_t *input, int32_t input_offset,
                      const int8_t *filter_row, int32_t filter_offset,
                      uint16_t row_len)
{
    uint32_t acc = 0;
    uint16_t i;
    for (i = 0; i < row_len; ++i) {
        acc += ((uint32_t)filter_row[i] + (uint32_t)filter_offset) *
               ((uint32_t)input[i] + (uint32_t)input_offset);
    }
    return sn_i32(acc);
}

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
                                    const int32_t activation_max)
{
    uint16_t o;
    for (o = 0; o < out_channels; ++o) {
        int32_t acc = fc_dot(input_data, input_offset,
                             filter_data + (size_t)o * row_len, filter_offset, row_len);
        if (bias != NULL) {
            acc = sn_add(acc, bias[o]);
        }
        acc = sn_add(sn_mbqm(acc, out_mult, out_shift), out_offset);
        out_data[o] = sn_wrap8(sn_clamp_lo_first(acc, activation_min, activation_max));
    }
}

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
                                           const int32_t activation_max)
{
    uint16_t o;
    for (o = 0; o < out_channels; ++o) {
        int32_t acc = fc_dot(input_data, input_offset,
                             filter_data + (size_t)o * row_len, filter_offset, row_len);
        if (bias != NULL) {
            acc = sn_add(acc, bias[o]);
        }
        acc = sn_add(sn_mbqm(acc, out_mult[o], out_shift[o]), out_offset);
        out_data[o] = sn_wrap8(sn_clamp_lo_first(acc, activation_min, activation_max));
    }
}
