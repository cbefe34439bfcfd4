/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- private integer helpers.
 *
 * Not part of ESP-NN; not a public header.  These helpers implement the
 * TFLite/gemmlowp integer primitives that ESP-NN's ANSI kernels are defined
 * by (TFLite/gemmlowp fixed-point rules, as documented with ESP-NN 1.2.3).
 *
 * Overflow policy.  ESP-NN's C code is compiled with plain int32 arithmetic
 * and, where a value leaves the int32 range, relies on two's-complement
 * wrap-around (it is meant to be built with -fwrapv).  The stand-in spells
 * every such wrap out explicitly with unsigned arithmetic (sn_add/sn_mul/...),
 * so it has no signed-overflow undefined behaviour and gives the same bits
 * with or without -fwrapv (the host build passes -fwrapv anyway).  Narrowing
 * conversions that ESP-NN performs implicitly (int32 -> int16/int8 stores)
 * are spelled out as modular wraps (sn_wrap16/sn_wrap8), which is what the
 * compilers ESP-NN targets do.  Shift counts that would be undefined in
 * ESP-NN (negative or >= 32) are given a defined meaning here and are
 * documented at each helper; valid ESP-NN inputs never reach them.
 */
#ifndef EXECUTORCH_ESPNN_STANDIN_ARITH_H
#define EXECUTORCH_ESPNN_STANDIN_ARITH_H

#include <stddef.h>
#include <stdint.h>

/* ---- two's-complement wrapping without undefined behaviour ------------- */

/* Reinterpret the 32 bits of `u` as a signed value. */
static inline int32_t sn_i32(uint32_t u)
{
    if (u <= 0x7FFFFFFFu) {
        return (int32_t)u;
    }
    return (int32_t)(u - 0x80000000u) - INT32_MAX - 1;
}

static inline int32_t sn_add(int32_t a, int32_t b)
{
    return sn_i32((uint32_t)a + (uint32_t)b);
}

static inline int32_t sn_sub(int32_t a, int32_t b)
{
    return sn_i32((uint32_t)a - (uint32_t)b);
}

static inline int32_t sn_mul(int32_t a, int32_t b)
{
    return sn_i32((uint32_t)a * (uint32_t)b);
}

/* Low 16 / 8 bits of v as a signed value (a narrowing store). */
static inline int16_t sn_wrap16(int32_t v)
{
    const int32_t low = (int32_t)((uint32_t)v & 0xFFFFu);
    return (int16_t)(low >= 0x8000 ? low - 0x10000 : low);
}

static inline int8_t sn_wrap8(int32_t v)
{
    const int32_t low = (int32_t)((uint32_t)v & 0xFFu);
    return (int8_t)(low >= 0x80 ? low - 0x100 : low);
}

/* x * 2^s modulo 2^32 (a wrapping left shift).  s <= 0 leaves x unchanged,
 * s >= 32 gives 0 (all bits shifted out); ESP-NN only uses 0 <= s <= 31. */
static inline int32_t sn_shl_wrap(int32_t x, int32_t s)
{
    if (s <= 0) {
        return x;
    }
    if (s >= 32) {
        return 0;
    }
    return sn_i32((uint32_t)x << s);
}

/* ---- clamps -------------------------------------------------------------- */

/* min(max(v, lo), hi): lower bound applied first (conv, depthwise, FC,
 * mul_broadcast, pooling).  The order only matters when lo > hi. */
static inline int32_t sn_clamp_lo_first(int32_t v, int32_t lo, int32_t hi)
{
    v = v > lo ? v : lo;
    return v < hi ? v : hi;
}

/* max(min(v, hi), lo): upper bound applied first (add, mul). */
static inline int32_t sn_clamp_hi_first(int32_t v, int32_t lo, int32_t hi)
{
    v = v < hi ? v : hi;
    return v > lo ? v : lo;
}

static inline int32_t sn_sat8(int32_t v)
{
    return v < -128 ? -128 : (v > 127 ? 127 : v);
}

/* ---- fixed-point primitives (TFLite / gemmlowp) ---------------------------- */

/* SaturatingRoundingDoublingHighMul: round(a*b / 2^31) with the rounding
 * nudge chosen from the sign of the product (+2^30, or 1 - 2^30 when exactly
 * one operand is negative), then truncating division by 2^31.  The single
 * overflowing input pair INT32_MIN * INT32_MIN saturates to INT32_MAX. */
static inline int32_t sn_srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    {
        const int64_t product = (int64_t)a * (int64_t)b;
        const int64_t nudge = ((a < 0) != (b < 0)) ? (int64_t)1 - ((int64_t)1 << 30)
                                                   : ((int64_t)1 << 30);
        /* C99 integer division truncates toward zero, which is what is
         * wanted here; |product + nudge| < 2^62, the quotient fits int32. */
        return (int32_t)((product + nudge) / ((int64_t)1 << 31));
    }
}

/* RoundingDivideByPOT: x / 2^e rounded to nearest, ties away from zero.
 * Computed in 64 bits from the floor quotient and the (non-negative)
 * remainder, which for 0 <= e <= 31 is bit-identical to the int32
 * mask/threshold formulation.  Outside ESP-NN's range: e <= 0 returns x
 * unchanged, e > 32 returns 0 (the mathematically rounded value). */
static inline int32_t sn_rdbp(int32_t x, int32_t e)
{
    if (e <= 0) {
        return x;
    }
    if (e > 32) {
        return 0;
    }
    {
        const int64_t v = x;
        const int64_t pot = (int64_t)1 << e;
        const int64_t floor_q = v >= 0 ? v / pot : -((-v - 1) / pot) - 1;
        const int64_t rem = v - floor_q * pot;                 /* 0 <= rem < pot */
        const int64_t threshold = (pot - 1) / 2 + (v < 0 ? 1 : 0);
        return (int32_t)(floor_q + (rem > threshold ? 1 : 0));
    }
}

/* MultiplyByQuantizedMultiplier (TFLite's default double rounding):
 * left-shift by max(shift, 0) with wrap-around, SRDHM by the Q31 multiplier,
 * then a rounding right shift by max(-shift, 0).  shift > 0 is a left shift. */
static inline int32_t sn_mbqm(int32_t x, int32_t mult, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    /* -shift computed without overflowing for shift == INT32_MIN */
    const int32_t right = shift > 0 ? 0 : (shift < -32 ? 33 : -shift);
    return sn_rdbp(sn_srdhm(sn_shl_wrap(x, left), mult), right);
}

/* ---- window geometry ------------------------------------------------------ */

/* The kernel taps [*first, *last) along one axis that fall inside the image
 * [0, extent) for a window whose first tap is at `origin` (which may be
 * negative: top/left padding).  Taps outside are skipped, which clips the
 * window at both edges.  Computed in 64 bits, so nothing overflows. */
static inline void sn_tap_range(int32_t origin, int32_t kernel, int32_t extent,
                                int32_t *first, int32_t *last)
{
    const int64_t lo = origin < 0 ? -(int64_t)origin : 0;
    const int64_t room = (int64_t)extent - origin;
    const int64_t hi = room < kernel ? room : kernel;
    *first = (int32_t)(lo > kernel ? kernel : lo);
    *last = (int32_t)(hi < *first ? *first : hi);
}

#endif /* EXECUTORCH_ESPNN_STANDIN_ARITH_H */
