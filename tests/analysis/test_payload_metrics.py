"""executorch_espnn.analysis on hand-built XTS3 graphs: MAC counts, the
ESP32-S3 dispatch table (each rule has a case on both sides of its
condition), the arena lower bound and the timeline."""

from __future__ import annotations

import numpy as np
import pytest

from executorch_espnn import quant_params as qp
from executorch_espnn.analysis import arena_lower_bound, arena_timeline, payload_metrics
from executorch_espnn.analysis.s3_dispatch import RULES
from executorch_espnn.xts3_writer import Xts3Writer

S, Z = 0.05, 0


def conv_graph(op="CONV2D", in_shape=(1, 8, 8, 16), out_shape=(1, 8, 8, 16), k=(3, 3), pads=(1, 1),
               strides=(1, 1), dil=(1, 1), groups=1, ch_mult=1, input_offset=0) -> bytes:
    w = Xts3Writer()
    x = w.tensor(in_shape, scale=S, zero_point=Z)
    y = w.tensor(out_shape, scale=S, zero_point=Z)
    cout = out_shape[3]
    if op == "CONV2D":
        filt = np.ones((cout, *k, in_shape[3] // groups), np.int8)
        extra = dict(groups=groups)
    else:
        filt = np.ones((1, *k, cout), np.int8)
        extra = dict(ch_mult=ch_mult)
    mult, shift = qp.conv_multipliers(S, np.full(cout, 0.01, np.float32), S)
    w.op(op, [x, w.constant(filt), None, w.constant(mult), w.constant(shift)], [y], stride_h=strides[0],
         stride_w=strides[1], pad_top=pads[0], pad_left=pads[1], dilation_h=dil[0], dilation_w=dil[1],
         input_offset=input_offset, output_offset=0, act_min=-128, act_max=127, **extra)
    w.set_inputs([x])
    w.set_outputs([y])
    return w.to_bytes()


def only_op(blob):
    (row,) = payload_metrics(blob).ops
    return row


# ---------------------------------------------------------------- MACs
def test_conv_macs_are_output_elements_times_window():
    row = only_op(conv_graph(in_shape=(1, 8, 8, 16), out_shape=(1, 4, 4, 32), strides=(2, 2)))
    assert row.macs == 4 * 4 * 32 * 3 * 3 * 16


def test_grouped_conv_counts_the_group_width():
    row = only_op(conv_graph(in_shape=(1, 8, 8, 16), out_shape=(1, 8, 8, 16), groups=4))
    assert row.macs == 8 * 8 * 16 * 9 * 4


def test_depthwise_macs():
    row = only_op(conv_graph("DEPTHWISE_CONV2D", (1, 8, 8, 16), (1, 8, 8, 32), ch_mult=2))
    assert row.macs == 8 * 8 * 32 * 9


def test_fully_connected_macs_and_totals():
    w = Xts3Writer()
    x, y = w.tensor((2, 40), scale=S), w.tensor((2, 10), scale=S)
    w.op("FULLY_CONNECTED", [x, w.constant(np.ones((10, 40), np.int8)), None,
                             w.constant(np.array([1 << 30], np.int32)), w.constant(np.array([0], np.int32))],
         [y], input_offset=0, filter_offset=0, output_offset=0, act_min=-128, act_max=127)
    w.set_inputs([x])
    w.set_outputs([y])
    pm = payload_metrics(w.to_bytes())
    assert pm.macs == pm.ops[0].macs == 2 * 10 * 40
    assert pm.s3_simd_macs == pm.macs and pm.s3_simd_fraction == 1.0


@pytest.mark.parametrize("rhs_offset, k, kernel", [(0, 16, "ACCX"), (3, 16, "s16"), (0, 8, "s16")])
def test_batch_matmul_macs_and_fc_path(rhs_offset, k, kernel):
    w = Xts3Writer()
    a, b, y = w.tensor((2, 3, 5, k), scale=S), w.tensor((2, 3, 7, k), scale=S), w.tensor((2, 3, 5, 7), scale=S)
    w.op("BATCH_MATMUL", [a, b], [y], lhs_offset=0, rhs_offset=rhs_offset, output_offset=0, mult=1 << 30,
         shift=-10, act_min=-128, act_max=127, rhs_transposed=1)
    w.set_inputs([a, b])
    w.set_outputs([y])
    row = only_op(w.to_bytes())
    assert row.macs == 2 * 3 * 5 * 7 * k  # output elements x K
    assert row.s3_simd and kernel in row.kernel


# ---------------------------------------------------------------- S3 dispatch rules
@pytest.mark.parametrize("in_c, simd, kernel", [(16, True, "mult8_1x1"), (24, True, "mult8_1x1"),
                                                (4, False, "1x1 C"), (12, True, "1x1 C")])
def test_pointwise_conv_paths(in_c, simd, kernel):
    row = only_op(conv_graph(in_shape=(1, 8, 8, in_c), out_shape=(1, 8, 8, 8), k=(1, 1), pads=(0, 0)))
    assert row.s3_simd is simd and kernel in row.kernel
    if in_c == 12:  # 8 of 12 channels on QACC, the remainder scalar
        assert row.s3_simd_macs == row.macs * 8 // 12


def test_im2col_path_for_a_narrow_first_layer():
    row = only_op(conv_graph(in_shape=(1, 9, 9, 3), out_shape=(1, 5, 5, 32), strides=(2, 2)))
    assert row.s3_simd and "im2col" in row.kernel  # 3*3 < 16 <= 3*3*3


def test_general_path_when_the_row_is_wide():
    row = only_op(conv_graph(in_shape=(1, 8, 8, 16), out_shape=(1, 8, 8, 16)))
    assert row.s3_simd and "general" in row.kernel


def test_grouped_and_dilated_convs_are_staged_onto_the_simd_kernels():
    grouped = only_op(conv_graph(groups=2))
    assert grouped.s3_simd and "staged (2 groups one by one)" in grouped.reason
    dil = only_op(conv_graph(dil=(2, 2), pads=(2, 2)))
    assert dil.s3_simd and "staged (dilation by phases)" in dil.reason
    # Dilated with a stride on the dilated axis: no phase split, the interpreter's direct loop.
    strided = only_op(conv_graph(dil=(2, 2), pads=(2, 2), strides=(2, 2), out_shape=(1, 4, 4, 16)))
    assert not strided.s3_simd and "stride > 1 on the dilated axis" in strided.reason


def test_asymmetric_padding_defect_goes_to_ansi():
    # 8x8, 3x3, stride 2, pad 0 leading -> out 4 needs trailing pad 1 > 0: leading pad 0 is fine
    assert only_op(conv_graph(out_shape=(1, 4, 4, 16), strides=(2, 2), pads=(0, 0))).s3_simd
    # TF SAME on an even input with a 4x4 kernel: leading 1, trailing 2 -> defect
    row = only_op(conv_graph(k=(4, 4), pads=(1, 1), out_shape=(1, 8, 8, 16)))
    assert not row.s3_simd and "defect" in row.reason
    # PyTorch-style symmetric padding never triggers it
    assert only_op(conv_graph(k=(3, 3), pads=(1, 1))).s3_simd


def test_misaligned_images_go_to_ansi():
    # batch 2 of 5x5x3 = 75-byte images: image 1 starts at byte 75
    row = only_op(conv_graph(in_shape=(2, 5, 5, 3), out_shape=(2, 5, 5, 16)))
    assert row.s3_simd and row.s3_simd_macs == row.macs // 2


@pytest.mark.parametrize("ch, mult, simd", [(16, 1, True), (12, 1, True), (3, 1, False), (8, 2, False),
                                            (4, 4, True), (2, 8, True), (5, 3, False)])
def test_depthwise_paths(ch, mult, simd):
    row = only_op(conv_graph("DEPTHWISE_CONV2D", (1, 8, 8, ch), (1, 8, 8, ch * mult), ch_mult=mult))
    assert row.s3_simd is simd, row


def test_depthwise_scratch_defect_geometry_is_staged_on_the_simd_path():
    row = only_op(conv_graph("DEPTHWISE_CONV2D", (1, 8, 8, 16), (1, 8, 7, 16), pads=(1, 0)))
    assert row.s3_simd and "scratch defect" in row.reason and "staged padding" in row.kernel
    assert only_op(conv_graph("DEPTHWISE_CONV2D", (1, 8, 8, 8), (1, 8, 7, 8), pads=(1, 0))).s3_simd


@pytest.mark.parametrize("in_hw, k, pads, out_hw, offset, simd", [
    ((14, 14), (5, 5), (2, 2), (14, 14), 112, False),  # MobileNetV3-Small-224's 14x14x240 layers
    ((28, 28), (5, 5), (2, 2), (14, 14), 112, False),  # stride 2; bottom row past the image too
    ((14, 14), (5, 5), (0, 2), (10, 14), 112, True),   # every window inside the image vertically
    ((14, 14), (5, 5), (2, 2), (14, 14), 0, True),     # the filled rows are right when the offset is 0
    ((8, 8), (5, 5), (2, 2), (8, 8), 112, True),       # 2*(filter+input) <= 48 KiB: not tiled
    ((14, 14), (3, 3), (1, 1), (14, 14), 112, True),   # 3x3 takes the s8 paths
])
def test_depthwise_tiled_padding_defect_goes_to_ansi(in_hw, k, pads, out_hw, offset, simd):
    # ESP-NN 1.2.3's S3 row-tiled s16 mult1 depthwise (ch_mult 1, ch % 8 == 0, not 3x3,
    # 2*(filter+input) > 48 KiB) fills rows above/below the image with input_offset.
    strides = (2, 2) if out_hw[1] * 2 == in_hw[1] else (1, 1)
    row = only_op(conv_graph("DEPTHWISE_CONV2D", (1, *in_hw, 240), (1, *out_hw, 240), k=k, pads=pads,
                             strides=strides, input_offset=offset))
    assert row.s3_simd is simd, row
    assert simd or "tiled-padding defect" in row.reason


@pytest.mark.parametrize("ch, simd", [(8, True), (4, True), (6, False)])
def test_pool_channel_rule(ch, simd):
    w = Xts3Writer()
    x, y = w.tensor((1, 4, 4, ch), scale=S), w.tensor((1, 2, 2, ch), scale=S)
    w.op("MAX_POOL2D", [x], [y], kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    w.set_inputs([x])
    w.set_outputs([y])
    assert only_op(w.to_bytes()).s3_simd is simd


def test_every_rule_cites_its_source():
    for name, rule in RULES.items():
        assert rule.__doc__ and "§" in rule.__doc__, name  # a section of espnn-kernels.md


# ---------------------------------------------------------------- arena
def test_lower_bound_of_a_chain_is_the_largest_adjacent_pair():
    w = Xts3Writer()
    a, c = w.tensor((100,)), w.tensor((20,))
    w.op("RESHAPE", [a], [w.tensor((10, 10))])  # view: adds nothing
    pad = w.tensor((300,))
    w.op("PAD", [a], [pad], before0=200, before1=0, before2=0, before3=0, before4=0, pad_value=0)
    w.op("SLICE", [pad], [c], begin0=0, begin1=0, begin2=0, begin3=0, begin4=0, step0=1, step1=0, step2=0,
         step3=0, step4=0)
    w.set_inputs([a])
    w.set_outputs([c])
    blob = w.to_bytes()
    # step 0 (reshape): a + view (one class) = 112; step 1: a 112 + pad 304 = 416; step 2: pad + c 32 = 336
    assert arena_lower_bound(blob) == 416
    steps = arena_timeline(blob)
    assert [s.live_bytes for s in steps] == [112, 416, 336]
    assert all(s.plan_bytes >= s.live_bytes for s in steps)
    pm = payload_metrics(blob)
    assert pm.arena_lower_bound == 416 and pm.arena_bytes >= 416


def test_graph_inputs_count_together_before_the_first_op():
    w = Xts3Writer()
    a, b, c = w.tensor((64,)), w.tensor((64,)), w.tensor((16,))
    w.op("SLICE", [a], [c], begin0=0, begin1=0, begin2=0, begin3=0, begin4=0, step0=4, step1=0, step2=0,
         step3=0, step4=0)
    w.set_inputs([a, b])  # b unread: dead after the caller wrote it, but written together with a
    w.set_outputs([c])
    assert arena_lower_bound(w.to_bytes()) == 128


def test_bound_never_exceeds_the_stored_plans():
    from espnn_dev import op_corpus

    for name, blob in op_corpus.op_graphs():
        pm = payload_metrics(blob)
        assert 0 < pm.arena_lower_bound <= pm.arena_bytes, name
