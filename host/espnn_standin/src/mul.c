/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- element-wise multiply
 * and the per-channel broadcast multiply.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * y = MBQM((x1 + o1) * (x2 + o2), mult, shift) + out_offset, clamped.
 * The shift is a signed exponent (positive = left) and both functions use
 * the exact double-rounding requantization.
 */
#include "esp_nn.h"
#include "standin_arith.h"

static int32_t mul_requant(int8_t x1, int8_t x2, int32_t off1, int32_t off2,
                           int32_t out_offset, int32_t out_mult, int32_t out_shift)
{
    const int32_t product = sn_mul(sn_add(x1, off1), sn_add(x2, off2));
    return sn_add(sn_mbqm(product, out_mult, out_shift), out_offset);
}

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
                                    const int32_t size)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t y = mul_requant(input1_data[i], input2_data[i], input1_offset,
                                      input2_offset, out_offset, out_mult, out_shift);
        /* upper bound first, then lower (matters only if min > max) */
        output[i] = sn_wrap8(sn_clamp_hi_first(y, activation_min, activation_max));
    }
}

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
                                          const int32_t channels)
{
    int32_t s, c;
    for (s = 0; s < total_spatial; ++s) {
        const size_t base = (size_t)s * (size_t)(channels > 0 ? channels : 0);
        for (c = 0; c < channels; ++c) {
            const int32_t y = mul_requant(input1[base + (size_t)c], input2_per_ch[c],
                                          input1_offset, input2_offset,
                                          output_offset, output_mult, output_shift);
            /* lower bound first, then upper */
            output[base + (size_t)c] = sn_wrap8(sn_clamp_lo_first(y, activation_min, activation_max));
        }
    }
}
