/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- int8 logistic.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * ESP-NN's logistic is a 256-entry lookup table built in float32 (not
 * TFLite's integer logistic):
 *   lut[j] = clamp(roundf(256 / (1 + expf(-((int8)j - zp) * scale))) - 128)
 * for the input value (int8)j, so the table is indexed with (uint8)x.  The
 * output is fixed at scale 1/256, zero point -128.  The table therefore
 * depends on the C library's expf/roundf.
 */
#include <math.h>

#include "esp_nn.h"
#include "standin_arith.h"

int32_t esp_nn_get_logistic_s8_scratch_size_ansi(void)
{
    return 256; /* one output byte per int8 input value */
}

void esp_nn_logistic_s8_prepare_ansi(int8_t *scratch_buf,
                                     int32_t input_zero_point,
                                     float input_scale)
{
    int32_t j;
    for (j = 0; j < 256; ++j) {
        const int32_t q = j < 128 ? j : j - 256;                    /* (int8)j */
        /* Each step is stored to a volatile float: that rounds it to float
         * even where the compiler would otherwise keep extended precision
         * (x87 with -fexcess-precision=fast, or clang on i386).  For +, *, /
         * rounding twice (extended, then float) gives the float result. */
        volatile float centred, real, e, denom, scaled;
        int32_t level;
        centred = (float)sn_sub(q, input_zero_point);
        real = centred * input_scale;
        e = expf(-real);
        denom = 1.0f + e;
        scaled = 256.0f / denom;                                    /* [0, 256] or NaN */
        if (scaled != scaled) {
            /* NaN scale: ESP-NN converts NaN to int, which x86 turns into
             * INT32_MIN; minus 128 with wrap-around then clamps to 127.
             * The stand-in returns that without the undefined conversion. */
            level = 127;
        } else {
            level = (int32_t)roundf(scaled) - 128;
        }
        scratch_buf[j] = (int8_t)sn_sat8(level);
    }
}

void esp_nn_logistic_s8_ansi(const int8_t *input, int8_t *output,
                             int32_t size, const int8_t *scratch_buf)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = scratch_buf[(uint8_t)input[i]];
    }
}
