"""Which ESP-NN path each XTS3 op takes on an optimized ESP32-S3 build.

ONE table: ``RULES`` maps an opcode to its classifier; each classifier's
docstring quotes the dispatch rule it implements. Sources:

* ESP-NN 1.2.3's S3 dispatch conditions, as summarized in
  ESP-NN 1.2.3's ESP32-S3 sources (github.com/espressif/esp-nn, src/*/*_esp32s3.S and their C wrappers) and docs/performance.md;
* this runtime's own routing around those defects and limits
  (components/espnn_runtime/src/ops/*.cpp: conv.cpp stages grouped and
  dilated convs through the dense kernel and sends padding-defect and
  misaligned images to ANSI; depthwise_conv.cpp the scratch-defect and
  tiled-padding cases; pooling.cpp channels % 4 != 0; elementwise.cpp
  misaligned operands; fully_connected.cpp copies misaligned rows).

"SIMD" means the kernel's inner product (or elementwise body) runs on the
S3's vector unit (PIE: QACC/ACCX multiply-accumulate, 128-bit loads), i.e.
the ``_esp32s3`` assembly or its inline-asm C dispatchers, as opposed to
ESP-NN's scalar ANSI C, generic ``_opt`` C or the interpreter's own loops.
This is a static statement from the documented rules: nothing here was run
on an ESP32-S3.

The per-op result's ``simd_fraction`` is the share of the op's MACs on the
SIMD path (1.0 or 0.0, except where a path is documented to do a remainder
in scalar code, e.g. the 1x1 conv's in_ch % 8 tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable



@dataclass(frozen=True)
class S3Path:
    simd: bool
    simd_fraction: float  # share of the op's MACs on the SIMD path
    kernel: str  # which implementation runs
    reason: str  # the rule that decided


def _t(summary: dict, index):
    return summary["tensors"][index]


def _images_aligned(summary: dict, op: dict) -> float:
    """Share of the per-image calls whose input and output pointers are
    16-byte aligned (conv_util.h ForEachImage: misaligned images go to ANSI).
    Arena offsets are 16-aligned; image n starts n * image_bytes later."""
    x, y = _t(summary, op["inputs"][0]), _t(summary, op["outputs"][0])
    n = x["shape"][0]
    xi, yi = x["nbytes"] // n, y["nbytes"] // n
    ok = sum(1 for k in range(n) if (x["offset"] + k * xi) % 16 == 0 and (y["offset"] + k * yi) % 16 == 0)
    return ok / n


def _implied_end_pad(size_in: int, k: int, size_out: int, stride: int, pad: int, dil: int = 1) -> int:
    return (size_out - 1) * stride + dil * (k - 1) + 1 - (size_in + pad)


def _dilated(p: dict, kh: int, kw: int) -> bool:
    return (p["dilation_h"] != 1 and kh > 1) or (p["dilation_w"] != 1 and kw > 1)


def conv2d(summary: dict, op: dict) -> S3Path:
    """§5.1 conv: (1) filt_dims.channels != in_ch -> ANSI, and ESP-NN ignores
    dilation [our runtime stages both: each group, or each phase of a dilation
    with stride 1 on the dilated axis, is gathered and run through the dense
    kernel; dilated and grouped, or dilated with a stride: its own direct
    loop]. (2) 1x1, pad 0, stride 1: in_ch % 8 == 0 -> mult8_1x1 asm; else
    C + inline-asm 1x1 (QACC MACs, scalar tail for the in_ch remainder and
    the last W*H % 8 pixels). (4) fw*in_ch < 16 and fw*fh*in_ch >= 16 ->
    im2col + ACCX dot product. (5) otherwise the general asm (filter rows
    zero-padded to 16). §5.3 item 1: asymmetric padding with a non-zero
    leading pad whose trailing pad is larger -> wrong last row/column
    [runtime: S3PaddingDefect -> ANSI]. Misaligned images -> ANSI."""
    p = op["params"]
    x, f, y = (_t(summary, op["inputs"][0]), _t(summary, op["inputs"][1]), _t(summary, op["outputs"][0]))
    _, in_h, in_w, in_c = x["shape"]
    _, kh, kw, cg = f["shape"]
    _, out_h, out_w, _ = y["shape"]
    phased_h, phased_w = kh > 1 and p["dilation_h"] != 1, kw > 1 and p["dilation_w"] != 1
    if _dilated(p, kh, kw) and (p["groups"] != 1 or (phased_h and p["stride_h"] != 1)
                                or (phased_w and p["stride_w"] != 1)):
        return S3Path(False, 0.0, "interpreter direct conv",
                      "dilated with groups or with stride > 1 on the dilated axis: ESP-NN ignores dilation")
    if _dilated(p, kh, kw) or p["groups"] != 1:
        # Staged [runtime: conv.cpp EvalStaged]: per phase of the dilation / per group, gathered into
        # 16-aligned scratch with the padding as the zero point, then the dense kernel with pad 0.
        stride_h = 1 if phased_h else p["stride_h"]
        stride_w = 1 if phased_w else p["stride_w"]
        how = "dilation by phases" if _dilated(p, kh, kw) else f"{p['groups']} groups one by one"
        return _dense_s3_path(1.0, kh, kw, cg, stride_h, stride_w, 0, 0, out_h, out_w, f"staged ({how}): ")
    if p["pad_top"] or p["pad_left"]:
        end_h = _implied_end_pad(in_h, kh, out_h, p["stride_h"], p["pad_top"])
        end_w = _implied_end_pad(in_w, kw, out_w, p["stride_w"], p["pad_left"])
        if end_h > p["pad_top"] or end_w > p["pad_left"]:
            return S3Path(False, 0.0, "esp_nn_conv_s8_ansi",
                          "trailing pad > leading pad (S3 asymmetric-pad defect, §5.3 item 1) -> ANSI")
    share = _images_aligned(summary, op)
    if share == 0.0:
        return S3Path(False, 0.0, "esp_nn_conv_s8_ansi", "image pointers not 16-byte aligned -> ANSI")
    return _dense_s3_path(share, kh, kw, in_c, p["stride_h"], p["stride_w"], p["pad_top"], p["pad_left"],
                          out_h, out_w, "")


def _dense_s3_path(share, kh, kw, in_c, stride_h, stride_w, pad_top, pad_left, out_h, out_w, prefix) -> S3Path:
    """§5.1 conv (2), (4), (5) for one dense esp_nn_conv_s8 call of `in_c` input channels."""
    if kh == kw == 1 and not pad_top and not pad_left and stride_h == stride_w == 1:
        if in_c % 8 == 0:
            return S3Path(True, share, "esp_nn_conv_s8_mult8_1x1_esp32s3",
                          prefix + "1x1, pad 0, stride 1, in_ch % 8 == 0")
        pixels = out_h * out_w
        frac = share * (in_c // 8 * 8) / in_c * (pixels - pixels % 8) / pixels
        return S3Path(frac > 0, frac, "1x1 C + inline asm (QACC)",
                      prefix + f"1x1, in_ch % 8 = {in_c % 8}: remainder channels and last W*H % 8 pixels scalar")
    if kw * in_c < 16 and kw * kh * in_c >= 16:
        return S3Path(True, share, "conv im2col + ACCX", prefix + "fw*in_ch < 16 and fw*fh*in_ch >= 16: im2col")
    return S3Path(True, share, "conv general asm (esp32s3)", prefix + "general S3 conv (filter rows padded to 16)")


def depthwise_conv2d(summary: dict, op: dict) -> S3Path:
    """§5.1 depthwise: ch_mult 1 and ch % 8 == 0 -> s8/s16 asm paths (3x3
    with ch % 16 == 0 and pad (1,1)/(0,0): s8 padded asm; 3x3 ch >= 12:
    channel-padded s8 asm; ch == 8: s16 3x3; other kernels: s16 mult1);
    ch_mult 1, ch > 3, ch % 8 != 0 -> channels padded to 8, s16 mult1;
    ch_mult % 8 == 0 -> s16 mult8; ch_mult % 4 == 0 -> s16 mult4; everything
    else (ch_mult 1 with ch <= 3; ch_mult 2, 3, 5, ...) -> generic _opt C.
    §5.3 item 2 (scratch under-allocation for 3x3, ch % 16 == 0, pads other
    than (0,0)/(1,1)) [runtime: -> ANSI]. Not in §5.3: ch_mult 1, ch % 8
    == 0, a kernel other than 3x3 and 2 * (filter + input) > 48 KiB take
    the row-tiled s16 mult1 path, which fills rows outside the image with
    input_offset instead of skipping them (esp_nn_depthwise_conv_s8_esp32s3.c)
    [runtime: with input_offset != 0 and a window above or below the image
    -> ANSI]. Dilation and int16-overflowing geometry [runtime: own direct
    loop]. Misaligned images -> ANSI."""
    p = op["params"]
    x, f, y = _t(summary, op["inputs"][0]), _t(summary, op["inputs"][1]), _t(summary, op["outputs"][0])
    _, in_h, in_w, ch = x["shape"]
    _, kh, kw, _ = f["shape"]
    out_h = y["shape"][1]
    m = p["ch_mult"]
    if _dilated(p, kh, kw):
        return S3Path(False, 0.0, "interpreter direct conv", "dilation != 1: ESP-NN ignores dilation")
    if max(in_h, in_w, p["pad_top"], p["pad_left"]) > 32767:
        return S3Path(False, 0.0, "interpreter direct conv", "geometry beyond ESP-NN's int16 window origin")
    if kh == kw == 3 and m == 1 and ch % 16 == 0 and (p["pad_top"], p["pad_left"]) not in ((0, 0), (1, 1)):
        return S3Path(False, 0.0, "esp_nn_depthwise_conv_s8_ansi",
                      "3x3, ch % 16 == 0, pads not (0,0)/(1,1): S3 scratch defect (§5.3 item 2) -> ANSI")
    if (m == 1 and ch % 8 == 0 and (kh, kw) != (3, 3) and 2 * (kh * kw * ch + in_h * in_w * ch) > 48 * 1024
            and p["input_offset"] != 0
            and (p["pad_top"] > 0 or _implied_end_pad(in_h, kh, out_h, p["stride_h"], p["pad_top"]) > 0)):
        return S3Path(False, 0.0, "esp_nn_depthwise_conv_s8_ansi",
                      "not 3x3, int16 copies > 48 KiB, input_offset != 0, rows outside the image: "
                      "S3 tiled-padding defect -> ANSI")
    share = _images_aligned(summary, op)
    if share == 0.0:
        return S3Path(False, 0.0, "esp_nn_depthwise_conv_s8_ansi", "image pointers not 16-byte aligned -> ANSI")
    if m == 1 and ch % 8 == 0:
        return S3Path(True, share, "depthwise s8/s16 mult1 asm", "ch_mult 1, ch % 8 == 0")
    if m == 1 and ch > 3:
        return S3Path(True, share, "depthwise s16 mult1 asm (channels padded to 8)", "ch_mult 1, ch > 3, ch % 8 != 0")
    if m % 8 == 0:
        return S3Path(True, share, "depthwise s16 mult8 asm", "ch_mult % 8 == 0")
    if m % 4 == 0:
        return S3Path(True, share, "depthwise s16 mult4 asm", "ch_mult % 4 == 0")
    return S3Path(False, 0.0, "depthwise generic _opt C", f"ch_mult {m} with {ch} channels: no S3 asm path")


def fully_connected(summary: dict, op: dict) -> S3Path:
    """§5.1 FC: filter_offset == 0, row_len >= 16 and the input 16-byte
    aligned -> C loop with an ACCX dot product; otherwise the s16 asm
    (esp_nn_fc_s16_esp32s3). Both are vector paths. [runtime: ESP-NN 1.2.3
    on the S3 gives wrong results for an input row that is not 16-byte
    aligned, so such rows are copied to the aligned scratch first.]"""
    p = op["params"]
    row = _t(summary, op["inputs"][1])["shape"][1]
    if p["filter_offset"] == 0 and row >= 16:
        return S3Path(True, 1.0, "FC ACCX dot product", "filter_offset 0, row_len >= 16, aligned rows")
    return S3Path(True, 1.0, "esp_nn_fc_s16_esp32s3", "row_len < 16 or filter_offset != 0: s16 asm")


def batch_matmul(summary: dict, op: dict) -> S3Path:
    """BATCH_MATMUL is esp_nn_fully_connected_s8 per output row (the rhs is the
    filter, rhs_offset its filter_offset), so §5.1 FC applies: filter_offset == 0
    and K >= 16 -> ACCX dot product, else the s16 asm. [runtime: an rhs [K, N]
    is transposed into the scratch per batch first (interpreter copy, no MACs);
    misaligned lhs rows are copied to the aligned scratch.]"""
    p = op["params"]
    k = _t(summary, op["inputs"][0])["shape"][-1]
    if p["rhs_offset"] == 0 and k >= 16:
        return S3Path(True, 1.0, "FC ACCX dot product", "rhs_offset 0, K >= 16, aligned rows")
    return S3Path(True, 1.0, "esp_nn_fc_s16_esp32s3", "K < 16 or rhs_offset != 0: s16 asm")


def _elementwise(name: str, min_size: int) -> Callable[[dict, dict], S3Path]:
    def rule(summary: dict, op: dict) -> S3Path:
        a, b = (_t(summary, t) for t in op["inputs"])
        y = _t(summary, op["outputs"][0])
        if a["shape"] != b["shape"]:
            c = y["shape"][-1]
            small = min(a["nbytes"], b["nbytes"])
            if name == "mul" and len(y["shape"]) >= 2 and small == c and max(a["nbytes"], b["nbytes"]) == y["nbytes"]:
                if c >= 8 and c % 16 == 0:
                    return S3Path(True, 1.0, "esp_nn_mul_broadcast_channel_s8_esp32s3",
                                  "[S,C] x [C], channels >= 8, rows 16-byte aligned")
                return S3Path(False, 0.0, "mul_broadcast_channel scalar", "channels < 8 or rows not 16-byte aligned")
            return S3Path(False, 0.0, "interpreter broadcast loop",
                          "broadcasting: ESP-NN add/mul take equal sizes only")
        n = y["nbytes"]
        if n < min_size:
            return S3Path(False, 0.0, f"{name} scalar loop", f"size < {min_size}")
        return S3Path(True, 1.0, f"esp_nn_{name}_elementwise_s8_esp32s3",
                      f"size >= {min_size}, operands 16-byte aligned (arena offsets)")

    rule.__doc__ = (f"§5.1 {name}: asm SIMD body when size >= {min_size} and both inputs 16-byte "
                    "aligned (output 8-byte aligned); broadcasting is not an ESP-NN case.")
    return rule


def _pool(name: str) -> Callable[[dict, dict], S3Path]:
    def rule(summary: dict, op: dict) -> S3Path:
        ch = _t(summary, op["inputs"][0])["shape"][3]
        if ch % 4 == 0:
            return S3Path(True, 1.0, f"esp_nn_{name}_pool_s8_esp32s3", "channels % 4 == 0")
        return S3Path(False, 0.0, f"esp_nn_{name}_pool_s8_ansi", "channels % 4 != 0 -> ANSI")

    rule.__doc__ = f"§5.1 {name}_pool: asm when channels % 4 == 0 [runtime: ANSI otherwise]."
    return rule


def softmax(summary: dict, op: dict) -> S3Path:
    """§5.1 softmax. ESP-NN 1.2.3's S3 softmax: the row maximum with ee.vmax.s8 (16 lanes)
    when the row has >= 32 elements, exp and normalisation in C. Its 128-bit
    loads ignore the low address bits, so [runtime: softmax.cpp] rows that do
    not start 16-byte aligned go to ANSI; with a 16-aligned arena that is
    every row but those at multiples of 16 when width % 16 != 0. Measured
    under QEMU: 0.57 of the ANSI instructions for 8x64 rows."""
    width = _t(summary, op["inputs"][0])["shape"][-1]
    if width < 32:
        return S3Path(False, 0.0, "esp_nn_softmax_s8_esp32s3 (C)", "width < 32: scalar row max, C exp")
    if width % 16:
        return S3Path(False, 0.0, "esp_nn_softmax_s8_ansi (misaligned rows)",
                      "width % 16 != 0: rows not 16-byte aligned -> ANSI (ee.vld.128 ignores the low address bits)")
    return S3Path(True, 1.0, "esp_nn_softmax_s8_esp32s3", "width >= 32, aligned rows: SIMD row max, C exp")


def _scalar(kernel: str, why: str) -> Callable[[dict, dict], S3Path]:
    def rule(summary: dict, op: dict) -> S3Path:
        return S3Path(False, 0.0, kernel, why)

    rule.__doc__ = why
    return rule


# The one table: opcode -> classifier (each classifier's docstring is its rule).
RULES: dict[str, Callable[[dict, dict], S3Path]] = {
    "CONV2D": conv2d,
    "DEPTHWISE_CONV2D": depthwise_conv2d,
    "FULLY_CONNECTED": fully_connected,
    "BATCH_MATMUL": batch_matmul,
    "ADD": _elementwise("add", 12),
    "MUL": _elementwise("mul", 8),
    "AVG_POOL2D": _pool("avg"),
    "MAX_POOL2D": _pool("max"),
    "SOFTMAX": softmax,
    "MEAN_HW": _scalar("esp_nn_mean_nhwc_s8 (C)", "§5.1 mean: pure C (int16/int32 accumulation), no SIMD"),
    "HARD_SWISH": _scalar("esp_nn_hard_swish_s8 (LUT C)", "§5.1 hard_swish: per-call LUT built with ANSI"),
    "TRANSPOSE_CONV2D": _scalar("interpreter transposed conv", "§3/§5.1: ESP-NN has no transposed conv; the interpreter computes it"),
    "LAYER_NORM": _scalar("interpreter layer norm", "§1.4: ESP-NN has no normalisation function; the interpreter computes it "
                          "in integer C (two passes per row)"),
    "GRU": _scalar("interpreter GRU", "§1.4: ESP-NN's FC writes int8 only and the gates need int16 pre-activations: "
                   "the interpreter's int32 dot products (C)"),
    "LSTM": _scalar("interpreter LSTM", "§1.4: ESP-NN's FC writes int8 only and the gates need int16 pre-activations: "
                    "the interpreter's int32 dot products (C)"),
}


def s3_path(summary: dict, op: dict) -> S3Path:
    """The S3 path of one op of a native summary."""
    rule = RULES.get(op["op"])
    if rule is None:
        return S3Path(False, 0.0, "interpreter", "no ESP-NN kernel (data movement, quantization, LUT)")
    return rule(summary, op)
