/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- 2-D convolution.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * NHWC input (one image), OHWI filter [out_ch][k_h][k_w][filter_ch] where
 * filter_ch = filter_dims->channels is the per-group input channel count
 * (0 means "all input channels", as in ESP-NN's ANSI path).  Grouping follows
 * TFLite: groups = in_ch / filter_ch, output channel o belongs to group
 * o / (out_ch / groups).  Only the top/left pad is given; taps that fall
 * outside the image are skipped (equivalent to padding with the input zero
 * point) and the bottom/right edge is clipped implicitly.  Dilation and
 * `extra` are ignored.  Like ESP-NN, every geometry value is narrowed to
 * uint16_t before use.
 */
#include "esp_nn.h"
#include "standin_arith.h"

int esp_nn_get_conv_scratch_size_ansi(const data_dims_t *input_dims,
                                      const data_dims_t *filter_dims,
                                      const data_dims_t *output_dims,
                                      const conv_params_t *conv_params)
{
    (void)input_dims;
    (void)filter_dims;
    (void)output_dims;
    (void)conv_params;
    return 0; /* the reference path works in place */
}

void esp_nn_set_conv_scratch_buf_ansi(const void *buf)
{
    (void)buf; /* nothing to remember */
}

void esp_nn_conv_s8_ansi(const data_dims_t *input_dims,
                         const int8_t *input_data,
                         const data_dims_t *filter_dims,
                         const int8_t *filter_data,
                         const int32_t *bias,
                         const data_dims_t *output_dims,
                         int8_t *out_data,
                         const conv_params_t *conv_params,
                         const quant_data_t *quant_data)
{
    const uint16_t in_w = (uint16_t)input_dims->width;
    const uint16_t in_h = (uint16_t)input_dims->height;
    const uint16_t in_ch = (uint16_t)input_dims->channels;
    const uint16_t k_w = (uint16_t)filter_dims->width;
    const uint16_t k_h = (uint16_t)filter_dims->height;
    /* 0 selects in_ch; the choice is made on the int32 field, then narrowed */
    const uint16_t grp_ch = (uint16_t)(filter_dims->channels != 0 ? filter_dims->channels
                                                                  : input_dims->channels);
    const uint16_t out_w = (uint16_t)output_dims->width;
    const uint16_t out_h = (uint16_t)output_dims->height;
    const uint16_t out_ch = (uint16_t)output_dims->channels;
    const uint16_t stride_w = (uint16_t)conv_params->stride.width;
    const uint16_t stride_h = (uint16_t)conv_params->stride.height;
    const uint16_t pad_w = (uint16_t)conv_params->padding.width;
    const uint16_t pad_h = (uint16_t)conv_params->padding.height;
    const int32_t in_offset = conv_params->in_offset;
    const int32_t out_offset = conv_params->out_offset;
    const int32_t act_min = conv_params->activation.min;
    const int32_t act_max = conv_params->activation.max;
    const int32_t *shift = quant_data->shift;
    const int32_t *mult = quant_data->mult;
    const size_t filter_per_out = (size_t)k_h * k_w * grp_ch;
    int32_t groups;
    int32_t outs_per_group;
    int32_t oy, ox, oc;

    /* ESP-NN divides by zero here (grp_ch == 0, grp_ch > in_ch or
     * out_ch < groups); such a call is invalid, the stand-in writes nothing. */
    if (grp_ch == 0) {
        return;
    }
    groups = in_ch / grp_ch;
    if (groups == 0) {
        return;
    }
    outs_per_group = out_ch / groups;
    if (outs_per_group == 0) {
        return;
    }

    for (oy = 0; oy < out_h; ++oy) {
        /* window origin, int32 with wrap-around like ESP-NN */
        const int32_t y0 = sn_sub(sn_mul(oy, stride_h), pad_h);
        int32_t fy_first, fy_last;
        sn_tap_range(y0, k_h, in_h, &fy_first, &fy_last);
        for (ox = 0; ox < out_w; ++ox) {
            const int32_t x0 = sn_sub(sn_mul(ox, stride_w), pad_w);
            int32_t fx_first, fx_last;
            sn_tap_range(x0, k_w, in_w, &fx_first, &fx_last);
            for (oc = 0; oc < out_ch; ++oc) {
                const size_t first_in_ch = (size_t)(oc / outs_per_group) * grp_ch;
                const int8_t *filt = filter_data + (size_t)oc * filter_per_out;
                uint32_t acc = 0; /* int32 accumulator, wrapping */
                int32_t fy, fx, c, y;

                for (fy = fy_first; fy < fy_last; ++fy) {
                    const size_t row = (size_t)(y0 + fy) * in_w;
                    for (fx = fx_first; fx < fx_last; ++fx) {
                        const int8_t *px = input_data + (row + (size_t)(x0 + fx)) * in_ch + first_in_ch;
                        const int8_t *tap = filt + ((size_t)fy * k_w + (size_t)fx) * grp_ch;
                        for (c = 0; c < grp_ch; ++c) {
                            acc += ((uint32_t)px[c] + (uint32_t)in_offset) * (uint32_t)tap[c];
                        }
                    }
                }
                if (bias != NULL) {
                    acc += (uint32_t)bias[oc];
                }
                y = sn_add(sn_mbqm(sn_i32(acc), mult[oc], shift[oc]), out_offset);
                *out_data++ = sn_wrap8(sn_clamp_lo_first(y, act_min, act_max));
            }
        }
    }
}
