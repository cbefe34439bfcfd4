// Camera frame -> model input, in plain C++ (no ESP-IDF): compiled by the
// app and, for tests/examples/test_esp32s3_camera.py, on the host, where it
// is checked against PyTorch's bilinear resize.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// RGB565 frame (esp32-camera byte order: high byte first, RRRRRGGG GGGBBBBB)
// of src_w x src_h pixels -> float planes [3][dst_h][dst_w] (NCHW without
// the batch), each channel expanded to [0, 1] (r/31, g/63, b/31), resized
// bilinearly with half-pixel centres (PyTorch's interpolate(mode="bilinear",
// align_corners=False) without antialiasing), then (v - mean[c]) / std[c].
// Returns 0, or -1 for a size of zero or a null pointer.
int espnn_camera_rgb565_to_input(const uint8_t* rgb565, int src_w, int src_h, float* out, int dst_w, int dst_h,
                                 const float mean[3], const float std[3]);

#ifdef __cplusplus
}
#endif
