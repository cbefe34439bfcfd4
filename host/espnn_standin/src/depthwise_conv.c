/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- depthwise convolution.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * NHWC input, filter [k_h][k_w][in_ch * ch_mult]; output channel
 * o = c * ch_mult + m reads input channel c.  The number of output channels
 * comes from in_ch * ch_mult: output_dims->channels and
 * filter_dims->channels are not read.  Geometry is narrowed to uint16_t, and
 * the window origin (out * stride - pad) to int16_t, as ESP-NN does.  Taps
 * outside the image are skipped; dilation is ignored.
 */
#include "esp_nn.h"
#include "standin_arith.h"

int esp_nn_get_depthwise_conv_scratch_size_ansi(const data_dims_t *input_dims,
                                                const data_dims_t *filter_dims,
                                                const data_dims_t *output_dims,
                                                const dw_conv_params_t *conv_params)
{
    (void)input_dims;
    (void)filter_dims;
    (void)output_dims;
    (void)conv_params;
    return 0;
}

void esp_nn_set_depthwise_conv_scratch_buf_ansi(const void *buf)
{
    (void)buf;
}

void esp_nn_depthwise_conv_s8_ansi(const data_dims_t *input_dims,
                                   const int8_t *input_data,
                                   const data_dims_t *filter_dims,
                                   const int8_t *filter_data,
                                   const int32_t *bias,
                                   const data_dims_t *output_dims,
                                   int8_t *out_data,
                                   const dw_conv_params_t *conv_params,
                                   const quant_data_t *quant_data)
{
    const uint16_t in_w = (uint16_t)input_dims->width;
    const uint16_t in_h = (uint16_t)input_dims->height;
    const uint16_t in_ch = (uint16_t)input_dims->channels;
    const uint16_t depth_mult = (uint16_t)conv_params->ch_mult;
    const uint16_t k_w = (uint16_t)filter_dims->width;
    const uint16_t k_h = (uint16_t)filter_dims->height;
    const uint16_t out_w = (uint16_t)output_dims->width;
    const uint16_t out_h = (uint16_t)output_dims->height;
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
    const size_t filt_stride = (size_t)in_ch * depth_mult; /* one tap, all outputs */
    int32_t oy, ox, c, m;

    for (oy = 0; oy < out_h; ++oy) {
        const int32_t y0 = sn_wrap16(sn_sub(sn_mul(oy, stride_h), pad_h));
        int32_t fy_first, fy_last;
        sn_tap_range(y0, k_h, in_h, &fy_first, &fy_last);
        for (ox = 0; ox < out_w; ++ox) {
            const int32_t x0 = sn_wrap16(sn_sub(sn_mul(ox, stride_w), pad_w));
            int32_t fx_first, fx_last;
            sn_tap_range(x0, k_w, in_w, &fx_first, &fx_last);
            for (c = 0; c < in_ch; ++c) {
                for (m = 0; m < depth_mult; ++m) {
                    const size_t o = (size_t)c * depth_mult + (size_t)m;
                    uint32_t acc = 0; /* int32 accumulator, wrapping */
                    int32_t fy, fx, y;

                    for (fy = fy_first; fy < fy_last; ++fy) {
                        const size_t row = (size_t)(y0 + fy) * in_w;
                        for (fx = fx_first; fx < fx_last; ++fx) {
                            const int8_t x = input_data[(row + (size_t)(x0 + fx)) * in_ch + (size_t)c];
                            const int8_t w = filter_data[((size_t)fy * k_w + (size_t)fx) * filt_stride + o];
                            acc += ((uint32_t)x + (uint32_t)in_offset) * (uint32_t)w;
                        }
                    }
                    if (bias != NULL) {
                        acc += (uint32_t)bias[o];
                    }
                    y = sn_add(sn_mbqm(sn_i32(acc), mult[o], shift[o]), out_offset);
                    *out_data++ = sn_wrap8(sn_clamp_lo_first(y, act_min, act_max));
                }
            }
        }
    }
}
