/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- spatial mean.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * [H][W][C] -> [C]:  y = MBQM(sum(x) - H*W*input_zp, mult, shift) + output_zp,
 * clamped to int8.  Zero points are passed as they are (not negated), and
 * the caller must already have folded the 1/(H*W) factor into mult/shift.
 * Sums are int32 with wrap-around.
 */
#include "esp_nn.h"
#include "standin_arith.h"

void esp_nn_mean_nhwc_s8_ansi(const int8_t *input, int8_t *output,
                              const int32_t height, const int32_t width,
                              const int32_t channels,
                              const int32_t input_zero_point,
                              const int32_t output_zero_point,
                              const int32_t multiplier,
                              const int32_t shift)
{
    const int32_t count = sn_mul(height, width);
    const size_t pixels = (height > 0 && width > 0) ? (size_t)height * (size_t)width : 0;
    int32_t c;

    for (c = 0; c < channels; ++c) {
        uint32_t sum = 0;
        size_t p;
        int32_t y;
        for (p = 0; p < pixels; ++p) {
            sum += (uint32_t)input[p * (size_t)channels + (size_t)c];
        }
        y = sn_sub(sn_i32(sum), sn_mul(count, input_zero_point));
        y = sn_add(sn_mbqm(y, multiplier, shift), output_zero_point);
        output[c] = (int8_t)sn_sat8(y);
    }
}
