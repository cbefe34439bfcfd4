"""One small single-op XTS3 graph per branch of the runtime's S3 routing.

The runtime's route description (components/espnn_runtime/src/ops/s3_route.h,
read through ``analysis/s3_dispatch.py``) says, per op, which ESP-NN code
path an optimized ESP32-S3 build takes, and whether that path is SIMD. It is
a static statement; these cases are what it is measured
against: tools/device-evidence/collect.py (suite ``s3_dispatch``) and the
QEMU tests in tests/idf run each case on an emulated ESP32-S3 built twice
(ESP-NN optimized and ESP-NN ANSI C) and compare guest instructions per run.
A branch the table calls SIMD must run well under the ANSI build's
instructions; one it calls scalar about the same.

:func:`cases` gives one bundle case per branch (every ``kernel`` a classifier
can return; for CONV2D each dense kernel unstaged plus the staged route by
dilation phases and by groups). :func:`expected_kernels` is not a second
table: it runs every case's model through ``payload_metrics``, i.e. through
the runtime's routing itself, so a case whose geometry stops reaching its
branch is seen by tests/device/test_dispatch_cases.py (which also checks that
every kernel the routing lists has a case).

Sizes: a few hundred thousand MACs (or some thousand elements) at most per
case, so a case runs quickly under the emulator, but large enough that the
kernel body, not loop or call overhead, decides the instruction count; only
the "size < N" elementwise branches are tiny by definition. The depthwise
"geometry beyond int16" branch is a [1, 1, 32800, 1] row (3 taps, about
100 K MACs).

Two branches cannot be built and have no case (their kernel strings are
covered by other branches, so the coverage test needs no exclusion for
them):

* CONV2D / DEPTHWISE_CONV2D "image pointers not 16-byte aligned -> ANSI"
  (no image aligned): arena offsets are 16-byte aligned (the writer
  and parser refuse anything else), so image 0 is always aligned and the
  share is at least 1/batch. The ``*_misaligned_images_half`` cases (batch
  2, per-image bytes not a multiple of 16) take the mixed route instead:
  image 0 on the SIMD kernel, image 1 on ANSI (``simd_fraction`` 0.5).
"""

from __future__ import annotations

import numpy as np

from executorch_espnn import quant_params as qp
from executorch_espnn.analysis import payload_metrics
from executorch_espnn.bundle import BundleCase, make_case

from .graph_util import Const, Input, Out, build_op

S = 0.05  # activation scale of every case
SEED = 20240  # numpy seed of the inputs and weights


def _rand(rng, shape, low=-128, high=128, dtype=np.int8):
    return rng.integers(low, high, shape).astype(dtype)


# ------------------------------------------------------------------ conv ops
def _conv(rng, x_shape, k, cout, *, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1, out_hw=None):
    """CONV2D [N,H,W,Cin] -> [N,OH,OW,cout]; kernel k = (kh, kw); out_hw defaults to the
    symmetric-padding (PyTorch) size."""
    n, h, w, cin = x_shape
    kh, kw = k
    if out_hw is None:
        out_hw = tuple((size + 2 * p - d * (kk - 1) - 1) // s + 1
                       for size, p, d, kk, s in zip((h, w), pad, dil, k, stride))
    weights = _rand(rng, (cout, kh, kw, cin // groups), -127, 128)
    mult, shift = qp.conv_multipliers(S, np.full(cout, 0.004, np.float32), S)
    return build_op(
        "CONV2D",
        [Input(_rand(rng, x_shape), S, 0), Const(weights), Const(_rand(rng, cout, -500, 500, np.int32)),
         Const(mult), Const(shift)],
        [Out((n, *out_hw, cout), "INT8", S, 0)],
        stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], dilation_h=dil[0],
        dilation_w=dil[1], groups=groups, input_offset=0, output_offset=0, act_min=-128, act_max=127)


def _dw(rng, x_shape, k, ch_mult, *, stride=(1, 1), pad=(0, 0), dil=(1, 1), out_hw=None, zero_point=0):
    """DEPTHWISE_CONV2D [N,H,W,C] -> [N,OH,OW,C*ch_mult]; `zero_point` of the input."""
    n, h, w, c = x_shape
    kh, kw = k
    cout = c * ch_mult
    if out_hw is None:
        out_hw = tuple((size + 2 * p - d * (kk - 1) - 1) // s + 1
                       for size, p, d, kk, s in zip((h, w), pad, dil, k, stride))
    mult, shift = qp.conv_multipliers(S, np.full(cout, 0.02, np.float32), S)
    return build_op(
        "DEPTHWISE_CONV2D",
        [Input(_rand(rng, x_shape), S, zero_point), Const(_rand(rng, (1, kh, kw, cout), -127, 128)),
         Const(_rand(rng, cout, -500, 500, np.int32)), Const(mult), Const(shift)],
        [Out((n, *out_hw, cout), "INT8", S, 0)],
        stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], dilation_h=dil[0],
        dilation_w=dil[1], ch_mult=ch_mult, input_offset=-zero_point, output_offset=0, act_min=-128, act_max=127)


def _conv_cases(rng):
    return {
        # (2) 1x1, pad 0, stride 1, in_ch % 8 == 0: 16x16x16 -> 32, 131 K MACs.
        "conv_1x1_mult8": _conv(rng, (1, 16, 16, 16), (1, 1), 32),
        # (2) 1x1 with in_ch % 8 = 4: C + inline asm, 8 of 12 channels on QACC. 98 K MACs.
        "conv_1x1_inline_asm_in_ch_12": _conv(rng, (1, 16, 16, 12), (1, 1), 32),
        # (4) fw*in_ch = 9 < 16, fw*fh*in_ch = 27 >= 16: im2col (an RGB stem). 110 K MACs.
        "conv_im2col": _conv(rng, (1, 16, 16, 3), (3, 3), 16, pad=(1, 1)),
        # (5) general asm: 3x3, 16 -> 8 channels, pad 1. 295 K MACs.
        "conv_general": _conv(rng, (1, 16, 16, 16), (3, 3), 8, pad=(1, 1)),
        # 4x4 kernel, TF SAME: pad_top/left 1, bottom/right 2 -> S3 padding defect -> ANSI. 262 K MACs.
        "conv_pad_defect_ansi": _conv(rng, (1, 16, 16, 8), (4, 4), 8, pad=(1, 1), out_hw=(16, 16)),
        # batch 2, 15x15x8 = 1800 bytes per image (not a multiple of 16): image 0 on the general
        # asm, image 1 on ANSI. 259 K MACs.
        "conv_misaligned_images_half": _conv(rng, (2, 15, 15, 8), (3, 3), 8, pad=(1, 1)),
        # dilation 2 and 2 groups: the interpreter's direct loop. 147 K MACs.
        "conv_dilated_grouped_direct": _conv(rng, (1, 16, 16, 16), (3, 3), 16, pad=(2, 2), dil=(2, 2),
                                             groups=2),
        # dilation 2, stride 1: staged by phases into the general asm. 295 K MACs.
        "conv_staged_dilated": _conv(rng, (1, 16, 16, 16), (3, 3), 8, pad=(2, 2), dil=(2, 2)),
        # 4 groups of 4 channels: staged per group, each group on im2col (fw*4 = 12 < 16 <= 36). 147 K MACs.
        "conv_staged_grouped": _conv(rng, (1, 16, 16, 16), (3, 3), 16, pad=(1, 1), groups=4),
    }


def _dw_cases(rng):
    return {
        # ch_mult 1, ch % 8 == 0 (3x3, ch 32, pad 1: the s8 padded asm). 74 K MACs.
        "dw_mult1_asm": _dw(rng, (1, 16, 16, 32), (3, 3), 1, pad=(1, 1)),
        # ch_mult 1, 12 channels: padded to 16, s16 mult1 asm. 28 K MACs.
        "dw_padded_channels": _dw(rng, (1, 16, 16, 12), (3, 3), 1, pad=(1, 1)),
        # ch_mult 8 on 2 channels: s16 mult8. 37 K MACs.
        "dw_mult8": _dw(rng, (1, 16, 16, 2), (3, 3), 8, pad=(1, 1)),
        # ch_mult 4 on 4 channels: s16 mult4. 37 K MACs.
        "dw_mult4": _dw(rng, (1, 16, 16, 4), (3, 3), 4, pad=(1, 1)),
        # ch_mult 2 on 8 channels: generic _opt C. 37 K MACs.
        "dw_generic_opt": _dw(rng, (1, 16, 16, 8), (3, 3), 2, pad=(1, 1)),
        # 3x3, ch_mult 1, 32 channels, pads (1, 0): the S3 scratch defect's geometry, staged
        # (padding written into scratch, pads (0, 0)) onto the s8 padded asm. 65 K MACs.
        "dw_scratch_defect_staged": _dw(rng, (1, 16, 16, 32), (3, 3), 1, pad=(1, 0), out_hw=(16, 14)),
        # 5x5, ch_mult 1, 600 channels on 4x4, input zero point 5: int16 copies of 49 KB > 48 KiB
        # and rows outside the image: ESP-NN's row-tiled s16 path would add zero-point taps -> ANSI.
        # 240 K MACs.
        "dw_tiled_pad_defect_ansi": _dw(rng, (1, 4, 4, 600), (5, 5), 1, pad=(2, 2), zero_point=5),
        # dilation 2: the interpreter's direct loop. 74 K MACs.
        "dw_dilated_direct": _dw(rng, (1, 16, 16, 32), (3, 3), 1, pad=(2, 2), dil=(2, 2)),
        # a row 32800 wide (> 32767, ESP-NN's int16 window origin): the direct loop. 98 K MACs.
        "dw_wide_int16_direct": _dw(rng, (1, 1, 32800, 1), (1, 3), 1, pad=(0, 1)),
        # batch 2, 15x15x8 = 1800 bytes per image: image 0 on the mult1 asm, image 1 on ANSI. 32 K MACs.
        "dw_misaligned_images_half": _dw(rng, (2, 15, 15, 8), (3, 3), 1, pad=(1, 1)),
    }


# ------------------------------------------------------------ matrix products
def _fc(rng, rows, row_len, out_ch, filter_offset=0):
    mult, shift = qp.conv_multipliers(S, np.full(out_ch, 0.002, np.float32), S)
    return build_op(
        "FULLY_CONNECTED",
        [Input(_rand(rng, (rows, row_len)), S, 0), Const(_rand(rng, (out_ch, row_len), -127, 128)),
         Const(_rand(rng, out_ch, -500, 500, np.int32)), Const(mult), Const(shift)],
        [Out((rows, out_ch), "INT8", S, 0)],
        input_offset=0, filter_offset=filter_offset, output_offset=0, act_min=-128, act_max=127)


def _bmm(rng, batch, m, n, k, rhs_offset=0):
    """[batch, m, k] x [batch, n, k]^T (rhs_transposed), both graph inputs (attention-like)."""
    return build_op(
        "BATCH_MATMUL", [Input(_rand(rng, (batch, m, k)), S, 0), Input(_rand(rng, (batch, n, k)), S, 0)],
        [Out((batch, m, n), "INT8", S, 0)],
        lhs_offset=0, rhs_offset=rhs_offset, output_offset=0, mult=2**30, shift=-9, act_min=-128,
        act_max=127, rhs_transposed=1)


def _matrix_cases(rng):
    return {
        # [4, 256] x [64, 256]^T, 66 K MACs, with filter_offset 0 / 3 (the s16 route for the same size).
        "fc_accx": _fc(rng, 4, 256, 64),
        "fc_s16": _fc(rng, 4, 256, 64, filter_offset=3),
        # [4, 32, 64] x [4, 32, 64]^T, 262 K MACs, with rhs_offset 0 / 3.
        "bmm_accx": _bmm(rng, 4, 32, 32, 64),
        "bmm_s16": _bmm(rng, 4, 32, 32, 64, rhs_offset=3),
    }


# --------------------------------------------------------------- elementwise
_ADD = dict(input1_offset=0, input2_offset=0, output_offset=0, act_min=-128, act_max=127,
            **qp.add_params(S, S, S))
_MUL_M, _MUL_S = qp.mul_multiplier(S, S, S)
_MUL = {"input1_offset": 0, "input2_offset": 0, "output_offset": 0, "output_mult": _MUL_M,
        "output_shift": _MUL_S, "act_min": -128, "act_max": 127}


def _binary(rng, op, a_shape, b_shape):
    out = np.broadcast_shapes(a_shape, b_shape)
    return build_op(op, [Input(_rand(rng, a_shape), S, 0), Input(_rand(rng, b_shape), S, 0)],
                    [Out(out, "INT8", S, 0)], **(_ADD if op == "ADD" else _MUL))


def _elementwise_cases(rng):
    fmap = (1, 16, 16, 32)  # 8192 elements
    return {
        "add_simd": _binary(rng, "ADD", fmap, fmap),
        "add_scalar_small": _binary(rng, "ADD", (1, 8), (1, 8)),  # size 8 < 12
        # innermost dim broadcast: the interpreter's per-element loop
        "add_broadcast": _binary(rng, "ADD", fmap, (1, 16, 16, 1)),
        "mul_simd": _binary(rng, "MUL", fmap, fmap),
        "mul_scalar_small": _binary(rng, "MUL", (1, 6), (1, 6)),  # size 6 < 8
        # squeeze-excite: [1,16,16,32] x [32]
        "mul_broadcast_channel_simd": _binary(rng, "MUL", fmap, (32,)),
        # [1,32,32,4] x [4]: channels < 8, ESP-NN's per-row scalar loop. (Not c % 16 != 0 with
        # c >= 8: ESP-NN checks each row's alignment, so with c = 24 every other row is SIMD.)
        "mul_broadcast_channel_scalar": _binary(rng, "MUL", (1, 32, 32, 4), (4,)),
        "mul_broadcast_loop": _binary(rng, "MUL", fmap, (1, 16, 16, 1)),
    }


# ------------------------------------------------------- pooling and the rest
def _pool(rng, op, x_shape):
    n, h, w, c = x_shape
    return build_op(op, [Input(_rand(rng, x_shape), S, 0)], [Out((n, h // 2, w // 2, c), "INT8", S, 0)],
                    kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0, act_min=-128,
                    act_max=127)


def _softmax(rng, rows, width):
    return build_op("SOFTMAX", [Input(_rand(rng, (rows, width)), S, 0)],
                    [Out((rows, width), "INT8", 1 / 256, -128)], **qp.softmax_params(S))


def _other_cases(rng):
    c = {
        "avg_pool_simd": _pool(rng, "AVG_POOL2D", (1, 16, 16, 32)),
        "avg_pool_ansi": _pool(rng, "AVG_POOL2D", (1, 16, 16, 30)),  # 30 % 4 != 0
        "max_pool_simd": _pool(rng, "MAX_POOL2D", (1, 16, 16, 32)),
        "max_pool_ansi": _pool(rng, "MAX_POOL2D", (1, 16, 16, 30)),
        "softmax_c_narrow": _softmax(rng, 16, 24),  # width < 32
        # width % 16 != 0: odd, so only row 0 of the 16 starts 16-byte aligned (S3 routine);
        # rows 1..15 go to ANSI. (A width of 40 would put every other row on the S3 routine.)
        "softmax_ansi_misaligned": _softmax(rng, 16, 49),
        "softmax_simd": _softmax(rng, 8, 64),
    }
    mult, shift = qp.mean_params(S, S, 16 * 16)
    c["mean_hw"] = build_op("MEAN_HW", [Input(_rand(rng, (1, 16, 16, 32)), S, 0)], [Out((1, 32), "INT8", S, 0)],
                            input_zero_point=0, output_zero_point=0, mult=mult, shift=shift)
    c["hard_swish"] = build_op("HARD_SWISH", [Input(_rand(rng, (1, 16, 16, 16)), S, 0)],
                               [Out((1, 16, 16, 16), "INT8", 0.03, 0)],
                               input_zero_point=0, output_zero_point=0, **qp.hard_swish_params(S, 0.03))
    # 8x8x16 -> 16x16x16, 3x3, stride 2, pad 1, output_padding 1: 147 K MACs.
    tmult, tshift = qp.conv_multipliers(S, np.full(16, 0.004, np.float32), S)
    c["transpose_conv"] = build_op(
        "TRANSPOSE_CONV2D",
        [Input(_rand(rng, (1, 8, 8, 16)), S, 0), Const(_rand(rng, (16, 3, 3, 16), -127, 128)),
         Const(_rand(rng, 16, -500, 500, np.int32)), Const(tmult), Const(tshift)],
        [Out((1, 16, 16, 16), "INT8", S, 0)],
        stride_h=2, stride_w=2, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, groups=1, input_offset=0,
        output_offset=0, act_min=-128, act_max=127)
    ln = qp.layer_norm_params(S, 0.02, 1e-5, 64, gamma=np.linspace(0.5, 1.5, 64), beta=np.linspace(-0.2, 0.2, 64))
    c["layer_norm"] = build_op(
        "LAYER_NORM", [Input(_rand(rng, (64, 64)), S, 0), Const(ln["gamma_mult"]), Const(ln["gamma_shift"]),
                       Const(ln["beta"])],
        [Out((64, 64), "INT8", 0.02, 0)], act_min=-128, act_max=127, **ln["params"])
    # GRU / LSTM: one layer over 16 steps of 16 features, hidden 16 (24.6 K / 32.8 K MACs).
    for op, g in (("GRU", 3), ("LSTM", 4)):
        rc = qp.recurrent_params(rng.normal(0, 0.5, (g * 16, 16)).astype(np.float32),
                                 rng.normal(0, 0.5, (g * 16, 16)).astype(np.float32),
                                 rng.normal(0, 0.2, g * 16).astype(np.float32),
                                 rng.normal(0, 0.2, g * 16).astype(np.float32), S, 1 / 128)
        c[op.lower()] = build_op(
            op, [Input(_rand(rng, (1, 16, 16)), S, 0)] + [Const(np.ascontiguousarray(rc[k])) for k in (
                "w_ih", "w_hh", "bias_ih", "bias_hh", "mult_ih", "shift_ih", "mult_hh", "shift_hh", "sigmoid",
                "tanh")],
            [Out((1, 16, 16), "INT8", 1 / 128, 0)], batch_first=1, **rc["params"])
    # An op with no RULES entry (s3_path's "interpreter" fallback): a LUT, the control case
    # whose two builds must execute the same code.
    table = np.arange(256, dtype=np.uint8).view(np.int8)[::-1].copy()
    c["interpreter_lut"] = build_op("LUT", [Input(_rand(rng, (1, 16, 16, 16)), S, 0), Const(table)],
                                    [Out((1, 16, 16, 16), "INT8", S, 0)])
    return c


def _graphs() -> dict[str, tuple[bytes, list[np.ndarray]]]:
    rng = np.random.default_rng(SEED)
    graphs: dict[str, tuple[bytes, list[np.ndarray]]] = {}
    for part in (_conv_cases, _dw_cases, _matrix_cases, _elementwise_cases, _other_cases):
        graphs.update(part(rng))
    return graphs


def cases(runs: int = 1) -> list[BundleCase]:
    """One bundle case per s3_dispatch branch; expected outputs from the host runtime."""
    return [make_case(name, blob, feeds, runs=runs) for name, (blob, feeds) in _graphs().items()]


def expected_kernels() -> dict[str, str]:
    """Case name -> the ``kernel`` s3_dispatch gives the case's single op (computed from RULES)."""
    out = {}
    for name, (blob, _) in _graphs().items():
        (op,) = payload_metrics(blob).ops
        out[name] = op.kernel
    return out


# ------------------------------------------------------------------ softmax rows
def softmax_row_cases() -> list[BundleCase]:
    """SOFTMAX over rows whose length is >= 32 and not a multiple of 16
    (attention over 49, 65 or 197 tokens). ESP-NN 1.2.3's S3 softmax finds
    each row's maximum with `ee.vld.128.ip`, which ignores the low 4 address
    bits, and advances rows by `width`: every row that does not start on a
    16-byte boundary would be read from the wrong bytes. Run on the emulated
    S3 by tests/idf/test_idf_qemu.py and tools/device-evidence."""
    rng = np.random.default_rng(49)
    cases = []
    for rows, width in ((4, 49), (3, 65), (2, 197), (2, 48)):
        x = rng.integers(-100, 0, (1, rows, width), dtype=np.int8)
        # Each row's peak at the last index of the 16-byte blocks the SIMD
        # loop reads: a row starting k bytes past a boundary is read from k
        # bytes early, so the loop misses that peak, finds too small a
        # maximum, and x - max > 0 breaks the fixed-point exp.
        x[0, :, (width & ~15) - 1] = 100
        blob, feeds = build_op("SOFTMAX", [Input(x, 0.05, 0)], [Out(x.shape, "INT8", 1 / 256, -128)],
                               **qp.softmax_params(0.05))
        cases.append(make_case(f"softmax_{rows}x{width}", blob, feeds, runs=1))
    return cases
