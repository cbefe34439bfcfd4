/*
 * executorch-espnn: host stand-in for ESP-NN 1.2.3 -- relu6.
 * Not ESP-NN code; written from ESP-NN 1.2.3's documented API and TFLite's reference integer formulas.
 *
 * In place, clamps the RAW int8 values to [0, 6]; this is not a quantized
 * ReLU6.  The element count is a uint16_t, as in ESP-NN.
 */
#include "esp_nn.h"

void esp_nn_relu6_s8_ansi(int8_t *data, uint16_t size)
{
    uint16_t i;
    for (i = 0; i < size; ++i) {
        if (data[i] < 0) {
            data[i] = 0;
        } else if (data[i] > 6) {
            data[i] = 6;
        }
    }
}
