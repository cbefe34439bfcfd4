/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- int8 softmax.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * TFLite's int8 -> int8 softmax in gemmlowp fixed point, one row of `width`
 * values at a time:
 *   d = x - max(row); entries with d < diff_min produce -128;
 *   z = SRDHM(d * 2^shift, mult)              (Q5.26, "input_beta" scaling)
 *   e = exp(z) for z <= 0                     (Q0.31)
 *   S = sum of e / 2^12                        (Q12.19)
 *   r = 1 / S via Newton-Raphson on the normalised sum
 *   y = sat8(RDBP(SRDHM(r, e), 35 - clz(S)) - 128)
 * The output scale is fixed at 1/256 with zero point -128.  The ANSI kernel
 * needs no scratch memory.
 */
#include "esp_nn.h"
#include "standin_arith.h"

/* integer bits of the exp accumulator (Q12.19) */
#define SUM_INTEGER_BITS 12

int32_t esp_nn_get_softmax_scratch_size_ansi(const int32_t width, const int32_t height)
{
    (void)width;
    (void)height;
    return 0;
}

void esp_nn_set_softmax_scratch_buf_ansi(void *buffer)
{
    (void)buffer;
}

/* gemmlowp SaturatingRoundingMultiplyByPOT for a positive exponent: a
 * left shift by `e` that saturates instead of overflowing. */
static int32_t sat_shl(int32_t v, int e)
{
    const int32_t limit = (int32_t)(((uint32_t)1 << (31 - e)) - 1u);
    if (v > limit) {
        return INT32_MAX;
    }
    if (v < -limit) {
        return INT32_MIN;
    }
    return v * ((int32_t)1 << e); /* |v| <= limit: no overflow */
}

/* exp(a) for a <= 0, a in Q5.26, result in Q0.31. */
static int32_t exp_of_nonpositive(int32_t a)
{
    /* exp(-2^k) in Q0.31 for k = -2 .. 4, i.e. exp(-1/4) ... exp(-16) */
    static const int32_t exp_of_minus_pot[7] = {
        1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242
    };
    const int32_t quarter = (int32_t)1 << (26 - 2);         /* 1/4 in Q5.26 */
    const int32_t exp_minus_eighth = 1895147668;           /* exp(-1/8), Q0.31 */
    const int32_t one_third = 715827883;                   /* 1/3, Q0.31 */
    /* Split a = r + q with r in [-1/4, 0) and q a non-positive multiple of
     * 1/4; exp(r) comes from a Taylor series around -1/8, exp(q) from the
     * binary expansion of -q. */
    const int32_t r = sn_sub((int32_t)((uint32_t)a & (uint32_t)(quarter - 1)), quarter);
    const int32_t minus_q = sn_sub(r, a);
    /* r + 1/8 as Q0.31 (r * 2^5 is exact: |r| <= 2^24) */
    const int32_t t = sn_add(sn_mul(r, 32), (int32_t)1 << 28);
    const int32_t t2 = sn_srdhm(t, t);
    const int32_t t3 = sn_srdhm(t2, t);
    const int32_t t4 = sn_srdhm(t2, t2);
    const int32_t t4_over_4 = sn_rdbp(t4, 2);
    /* t^4/24 + t^3/6 + t^2/2 */
    const int32_t poly = sn_rdbp(sn_add(sn_srdhm(sn_add(t4_over_4, t3), one_third), t2), 1);
    int32_t result = sn_add(exp_minus_eighth, sn_srdhm(exp_minus_eighth, sn_add(t, poly)));
    int k;

    for (k = 0; k < 7; ++k) {
        if (((uint32_t)minus_q >> (24 + k)) & 1u) {
            result = sn_srdhm(result, exp_of_minus_pot[k]);
        }
    }
    return a == 0 ? INT32_MAX : result;
}

/* 1 / (1 + x) for x in [0, 1) given in Q0.31; the result is in Q0.31
 * (i.e. 1/(1+x) in [1/2, 1]).  Newton-Raphson in Q2.29, three steps,
 * starting from 48/17 - 32/17 * d with d = (1 + x) / 2. */
static int32_t reciprocal_one_plus(int32_t x)
{
    const int64_t twice_half = (int64_t)x + INT32_MAX;
    /* rounding half sum of x and "one" */
    const int32_t half_denom = (int32_t)((twice_half + (twice_half >= 0 ? 1 : -1)) / 2);
    const int32_t c48_17 = 1515870810;     /* 48/17 in Q2.29 */
    const int32_t cm32_17 = -1010580540;   /* -32/17 in Q2.29 */
    const int32_t one_q2_29 = (int32_t)1 << 29;
    int32_t est = sn_add(c48_17, sn_srdhm(half_denom, cm32_17));
    int step;

    for (step = 0; step < 3; ++step) {
        const int32_t err = sn_sub(one_q2_29, sn_srdhm(half_denom, est));
        est = sn_add(est, sat_shl(sn_srdhm(est, err), 2));
    }
    return sat_shl(est, 1);
}

static int32_t count_leading_zeros(uint32_t v)
{
    int32_t n = 0;
    if (v == 0) {
        return 32;
    }
    while ((v & 0x80000000u) == 0) {
        v <<= 1;
        ++n;
    }
    return n;
}

/* The Q0.31 exp of one (x - max) difference that passed the diff_min test. */
static int32_t exp_of_diff(int32_t diff, int32_t mult, int32_t shift)
{
    return exp_of_nonpositive(sn_srdhm(sn_shl_wrap(diff, shift), mult));
}

void esp_nn_softmax_s8_ansi(const int8_t *input_data,
                            const int32_t height,
                            const int32_t width,
                            const int32_t mult,
                            const int32_t shift,
                            const int32_t diff_min,
                            int8_t *output_data)
{
    int32_t row;

    if (width <= 0) {
        return; /* nothing to write (ESP-NN would read one byte) */
    }
    for (row = 0; row < height; ++row) {
        const int8_t *in = input_data + (size_t)row * (size_t)width;
        int8_t *out = output_data + (size_t)row * (size_t)width;
        int8_t row_max = in[0];
        uint32_t sum = 0; /* Q12.19, int32 wrapping */
        int32_t headroom, bits_over_unit, scale, col;

        for (col = 1; col < width; ++col) {
            if (in[col] > row_max) {
                row_max = in[col];
            }
        }

        for (col = 0; col < width; ++col) {
            const int32_t diff = in[col] - row_max;
            if (diff >= diff_min) {
                /* Q0.31 -> Q12.19 */
                sum += (uint32_t)sn_rdbp(exp_of_diff(diff, mult, shift), SUM_INTEGER_BITS);
            }
        }

        /* Normalise the sum to [1, 2) (as 1 + x, x in Q0.31) and invert. */
        headroom = count_leading_zeros(sum);
        if (headroom < 32) {
            scale = reciprocal_one_plus(sn_i32((sum << headroom) - 0x80000000u));
        } else {
            scale = 0; /* empty sum: diff_min > 0, every output is -128 */
        }
        /* S = (1 + x) * 2^(12 - headroom), so e / S in units of 1/256 is
         * SRDHM(scale, e) / 2^(12 - headroom + 31 - 8).  When the sum of
         * exps reaches 512 (only possible for width >= 512) headroom <= 3
         * and this shift count exceeds 31: ESP-NN (like TFLite) then shifts
         * by an undefined amount (an x86-64 build outputs 127 everywhere),
         * while the stand-in returns the correctly rounded quotient. */
        bits_over_unit = SUM_INTEGER_BITS - headroom + 31 - 8;

        for (col = 0; col < width; ++col) {
            const int32_t diff = in[col] - row_max;
            if (diff >= diff_min) {
                const int32_t e = exp_of_diff(diff, mult, shift);
                const int32_t y = sn_rdbp(sn_srdhm(scale, e), bits_over_unit) - 128;
                out[col] = (int8_t)sn_sat8(y);
            } else {
                out[col] = -128;
            }
        }
    }
}
