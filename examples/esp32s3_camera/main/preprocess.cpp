// See preprocess.h.
#include "preprocess.h"

namespace {

struct Rgb {
  float c[3];
};

inline Rgb Pixel(const uint8_t* rgb565, int w, int x, int y) {
  const uint8_t* p = rgb565 + 2 * ((size_t)y * (size_t)w + (size_t)x);
  const unsigned v = ((unsigned)p[0] << 8) | p[1];
  return {{(float)(v >> 11) / 31.0f, (float)((v >> 5) & 0x3F) / 63.0f, (float)(v & 0x1F) / 31.0f}};
}

// Source coordinate of destination index i (half-pixel centres, clamped at
// 0 like PyTorch), its two neighbours and the weight of the second.
struct Tap {
  int i0, i1;
  float w1;
};

inline Tap SourceTap(int i, int src, int dst) {
  float s = ((float)i + 0.5f) * (float)src / (float)dst - 0.5f;
  if (s < 0.0f) s = 0.0f;
  int i0 = (int)s;
  if (i0 > src - 1) i0 = src - 1;
  const int i1 = i0 + 1 < src ? i0 + 1 : src - 1;
  return {i0, i1, s - (float)i0};
}

}  // namespace

extern "C" int espnn_camera_rgb565_to_input(const uint8_t* rgb565, int src_w, int src_h, float* out, int dst_w,
                                            int dst_h, const float mean[3], const float std[3]) {
  if (rgb565 == nullptr || out == nullptr || mean == nullptr || std == nullptr || src_w <= 0 || src_h <= 0 ||
      dst_w <= 0 || dst_h <= 0)
    return -1;
  const size_t plane = (size_t)dst_w * (size_t)dst_h;
  for (int y = 0; y < dst_h; ++y) {
    const Tap ty = SourceTap(y, src_h, dst_h);
    for (int x = 0; x < dst_w; ++x) {
      const Tap tx = SourceTap(x, src_w, dst_w);
      const Rgb a = Pixel(rgb565, src_w, tx.i0, ty.i0), b = Pixel(rgb565, src_w, tx.i1, ty.i0);
      const Rgb c = Pixel(rgb565, src_w, tx.i0, ty.i1), d = Pixel(rgb565, src_w, tx.i1, ty.i1);
      for (int ch = 0; ch < 3; ++ch) {
        const float top = a.c[ch] + (b.c[ch] - a.c[ch]) * tx.w1;
        const float bottom = c.c[ch] + (d.c[ch] - c.c[ch]) * tx.w1;
        const float v = top + (bottom - top) * ty.w1;
        out[(size_t)ch * plane + (size_t)y * (size_t)dst_w + (size_t)x] = (v - mean[ch]) / std[ch];
      }
    }
  }
  return 0;
}
