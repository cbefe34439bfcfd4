/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- int8 hard-swish.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas
 * and TFLite's documented int8 HardSwish algorithm (int16 fixed point):
 *
 *   v    = x - input_zp;  hi = v * 2^7                  (int16)
 *   o    = SRDHM16(hi, output_mult_fxp)                  input on output scale
 *   r    = hi scaled by reluish_mult_fxp * 2^reluish_mult_exp, saturating
 *   r    = (r + 2^15) / 2                                [-1, 1] -> [0, 1]
 *   p    = (r * o) / 2^15                                truncating, no rounding
 *   y    = sat8(RDBP16(p, -output_mult_exp) + output_zp)
 *
 * Zero points are raw (not negated); both multipliers are Q15; exponents are
 * signed, positive = left, and output_mult_exp must be <= 0.  Intermediate
 * results are stored as int16 exactly where the algorithm does (wrapping).
 */
#include "esp_nn.h"
#include "standin_arith.h"

/* floor(v / 2^15) without relying on the sign behaviour of >> */
static int32_t floor_div_2_15(int32_t v)
{
    return v >= 0 ? v / 32768 : -((-(v + 1)) / 32768) - 1;
}

/* Q15 rounding doubling high multiply: floor((a*b + 2^14) / 2^15), with the
 * one overflowing case (-1 * -1) saturating to the largest value. */
static int16_t srdhm16(int16_t a, int16_t b)
{
    if (a == INT16_MIN && b == INT16_MIN) {
        return INT16_MAX;
    }
    return sn_wrap16(floor_div_2_15((int32_t)a * b + (1 << 14)));
}

/* Q15 doubling high multiply without rounding: (a*b) / 2^15 truncated
 * toward zero, same saturating case. */
static int16_t sdhm16(int16_t a, int16_t b)
{
    if (a == INT16_MIN && b == INT16_MIN) {
        return INT16_MAX;
    }
    return sn_wrap16(((int32_t)a * b) / 32768);
}

/* v * 2^s saturated to int16.  The product is formed as a wrapping int32
 * (as in the int32 shift it stands for) for s <= 31; larger counts saturate
 * by sign. */
static int16_t sat_shl16(int16_t v, int32_t s)
{
    int32_t wide;
    if (s >= 32) {
        return v > 0 ? INT16_MAX : (v < 0 ? INT16_MIN : 0);
    }
    wide = sn_shl_wrap(v, s);
    if (wide > INT16_MAX) {
        return INT16_MAX;
    }
    if (wide < INT16_MIN) {
        return INT16_MIN;
    }
    return (int16_t)wide;
}

static int16_t rdbp16(int16_t v, int32_t e)
{
    return sn_wrap16(sn_rdbp(v, e));
}

void esp_nn_hard_swish_s8_ansi(const int8_t *input, int8_t *output,
                               const int32_t size,
                               const int16_t input_zero_point,
                               const int16_t output_mult_fxp,
                               const int16_t reluish_mult_fxp,
                               const int32_t reluish_mult_exp,
                               const int32_t output_mult_exp,
                               const int16_t output_zero_point)
{
    /* -exp as a right-shift count, safe for INT32_MIN */
    const int32_t out_rshift = output_mult_exp < -32 ? 33 : -output_mult_exp;
    const int32_t relu_rshift = reluish_mult_exp < -32 ? 33 : -reluish_mult_exp;
    int32_t i;

    for (i = 0; i < size; ++i) {
        const int16_t centred = sn_wrap16((int32_t)input[i] - input_zero_point);
        const int16_t hires = sn_wrap16((int32_t)centred * 128);
        const int16_t on_out_scale = srdhm16(hires, output_mult_fxp);
        int16_t reluish = hires;
        int16_t pre;
        int32_t y;

        if (reluish_mult_exp > 0) {
            reluish = sat_shl16(reluish, reluish_mult_exp - 1);
        }
        reluish = srdhm16(reluish, reluish_mult_fxp);
        if (reluish_mult_exp > 0) {
            reluish = sat_shl16(reluish, 1);
        } else if (reluish_mult_exp < 0) {
            reluish = rdbp16(reluish, relu_rshift);
        }
        /* [-1, 1] -> [0, 1]; the sum is non-negative so / 2 is a floor */
        reluish = (int16_t)(((int32_t)reluish + 32768) / 2);

        pre = sdhm16(reluish, on_out_scale);
        y = sn_wrap16((int32_t)rdbp16(pre, out_rshift) + output_zero_point);
        output[i] = (int8_t)sn_sat8(y);
    }
}
