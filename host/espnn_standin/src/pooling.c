/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- average and max pooling.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * NHWC, one image; input and output share scale and zero point, so there is
 * no requantization.  The pad is top/left only and each window is clipped
 * to the image: only in-image taps count.
 */
#include "esp_nn.h"
#include "standin_arith.h"

/* Window origins follow ESP-NN: int32, advanced by the stride per output
 * (wrapping), starting at -pad. */
static int32_t window_origin(int32_t out_idx, uint16_t stride, uint16_t pad)
{
    return sn_sub(sn_mul(out_idx, stride), pad);
}

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
                             const uint16_t channels)
{
    int32_t oy, ox, c;
    for (oy = 0; oy < output_ht; ++oy) {
        const int32_t y0 = window_origin(oy, stride_ht, pad_ht);
        int32_t fy_first, fy_last;
        sn_tap_range(y0, filter_ht, input_ht, &fy_first, &fy_last);
        for (ox = 0; ox < output_wd; ++ox) {
            const int32_t x0 = window_origin(ox, stride_wd, pad_wd);
            int32_t fx_first, fx_last;
            sn_tap_range(x0, filter_wd, input_wd, &fx_first, &fx_last);
            for (c = 0; c < channels; ++c) {
                uint32_t sum_bits = 0; /* int32 sum, wrapping */
                int32_t count = 0;
                int32_t sum, avg, fy, fx;
                for (fy = fy_first; fy < fy_last; ++fy) {
                    const size_t row = (size_t)(y0 + fy) * input_wd;
                    for (fx = fx_first; fx < fx_last; ++fx) {
                        sum_bits += (uint32_t)input[(row + (size_t)(x0 + fx)) * channels + (size_t)c];
                        ++count;
                    }
                }
                sum = sn_i32(sum_bits);
                if (count == 0) {
                    /* No in-image tap: ESP-NN divides by zero here.  The
                     * stand-in must not trap, so it averages to 0 (then
                     * clamps).  The interpreter never produces such a
                     * window. */
                    avg = 0;
                } else if (sum > 0) {
                    /* round half away from zero; C division truncates */
                    avg = sn_add(sum, count / 2) / count;
                } else {
                    avg = sn_sub(sum, count / 2) / count;
                }
                output[((size_t)oy * output_wd + (size_t)ox) * channels + (size_t)c] =
                    sn_wrap8(sn_clamp_lo_first(avg, activation_min, activation_max));
            }
        }
    }
}

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
                             const uint16_t channels)
{
    int32_t oy, ox, c;
    for (oy = 0; oy < output_ht; ++oy) {
        const int32_t y0 = window_origin(oy, stride_ht, pad_ht);
        int32_t fy_first, fy_last;
        sn_tap_range(y0, filter_ht, input_ht, &fy_first, &fy_last);
        for (ox = 0; ox < output_wd; ++ox) {
            const int32_t x0 = window_origin(ox, stride_wd, pad_wd);
            int32_t fx_first, fx_last;
            sn_tap_range(x0, filter_wd, input_wd, &fx_first, &fx_last);
            for (c = 0; c < channels; ++c) {
                int8_t best = INT8_MIN; /* also the result of an empty window */
                int32_t fy, fx;
                for (fy = fy_first; fy < fy_last; ++fy) {
                    const size_t row = (size_t)(y0 + fy) * input_wd;
                    for (fx = fx_first; fx < fx_last; ++fx) {
                        const int8_t v = input[(row + (size_t)(x0 + fx)) * channels + (size_t)c];
                        if (v > best) {
                            best = v;
                        }
                    }
                }
                /* The running value is an int8: each bound is applied and
                 * stored back as int8 in turn (only differs from a plain
                 * clamp for bounds outside [-128, 127]). */
                best = sn_wrap8(best > activation_min ? best : activation_min);
                best = sn_wrap8(best < activation_max ? best : activation_max);
                output[((size_t)oy * output_wd + (size_t)ox) * channels + (size_t)c] = best;
            }
        }
    }
}
