/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- element-wise add.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * TFLite's int8 Add: both inputs (offset added) are pre-shifted left by
 * `left_shift` (TFLite-Micro passes 20), rescaled to a common scale with
 * SRDHM + rounding right shift, summed, and the sum is rescaled the same way
 * to the output.  The three *_shift arguments are exponents <= 0; a positive
 * one is outside ESP-NN's contract and is treated here as "no shift".
 * Same-shape inputs only; no broadcasting.
 */
#include "esp_nn.h"
#include "standin_arith.h"

/* -shift as a right-shift count, without overflowing for INT32_MIN */
static int32_t right_count(int32_t shift)
{
    return shift < -32 ? 33 : -shift;
}

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
                                    const int32_t size)
{
    const int32_t rs1 = right_count(input1_shift);
    const int32_t rs2 = right_count(input2_shift);
    const int32_t rs_out = right_count(out_shift);
    int32_t i;

    for (i = 0; i < size; ++i) {
        int32_t a = sn_shl_wrap(sn_add(input1_data[i], input1_offset), left_shift);
        int32_t b = sn_shl_wrap(sn_add(input2_data[i], input2_offset), left_shift);
        int32_t y;
        a = sn_rdbp(sn_srdhm(a, input1_mult), rs1);
        b = sn_rdbp(sn_srdhm(b, input2_mult), rs2);
        y = sn_rdbp(sn_srdhm(sn_add(a, b), out_mult), rs_out);
        y = sn_add(y, out_offset);
        output[i] = sn_wrap8(sn_clamp_hi_first(y, activation_min, activation_max));
    }
}
