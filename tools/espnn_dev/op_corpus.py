"""Valid graphs that use the XTS3 ops together and the interpreter's routes
(ESP-NN and its own kernels). The -m32/sanitizer test runs them through the
native tool, which also checks that Invoke allocates nothing, together with
the single-op fuzz seeds (host/fuzz/corpus/run/op_*.xts3): between them
every opcode, so a new op needs no graph here unless it cannot stand alone
or should run in the runners' op-corpus suite (bundle_cases)."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from executorch_espnn import selfcheck
from executorch_espnn.xts3_writer import Xts3Writer

S, Z = 0.05, -3


def _conv_inputs(w: Xts3Writer, rng, cout: int, kh: int, kw: int, cin_g: int):
    weights = rng.integers(-127, 128, (cout, kh, kw, cin_g), dtype=np.int8)
    mult, shift = qp.conv_multipliers(S, np.full(cout, 0.01, np.float32), S)
    return [w.constant(weights), w.constant(rng.integers(-500, 500, cout, dtype=np.int32)),
            w.constant(mult), w.constant(shift)]


def _conv_params(**over):
    p = dict(stride_h=1, stride_w=1, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=-Z,
             output_offset=Z, act_min=-128, act_max=127)
    p.update(over)
    return p


def _everything_else() -> bytes:
    rng = np.random.default_rng(5)
    w = Xts3Writer()
    x = w.tensor([1, 6, 6, 8], scale=S, zero_point=Z)

    def t(shape, scale=S, zp=Z):
        return w.tensor(shape, scale=scale, zero_point=zp)

    grouped = t([1, 6, 6, 8])
    w.op("CONV2D", [x, *_conv_inputs(w, rng, 8, 3, 3, 2)], [grouped], **_conv_params(groups=4))
    dilated = t([1, 6, 6, 8])
    w.op("CONV2D", [grouped, *_conv_inputs(w, rng, 8, 3, 3, 8)], [dilated],
         **_conv_params(groups=1, dilation_h=2, dilation_w=2, pad_top=2, pad_left=2))
    dw = t([1, 6, 6, 16])
    w.op("DEPTHWISE_CONV2D", [dilated, *_conv_inputs(w, rng, 1, 3, 3, 16)[:1],
                              *_conv_inputs(w, rng, 16, 1, 1, 1)[1:]], [dw],
         **_conv_params(ch_mult=2, dilation_h=2, dilation_w=2, pad_top=2, pad_left=2))
    up = t([1, 12, 12, 16])
    w.op("TRANSPOSE_CONV2D", [dw, *_conv_inputs(w, rng, 16, 2, 2, 16)], [up],
         **_conv_params(groups=1, stride_h=2, stride_w=2, pad_top=0, pad_left=0))
    avg = t([1, 6, 6, 16])
    w.op("AVG_POOL2D", [up], [avg], kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    odd = t([1, 6, 6, 3])
    w.op("SLICE", [avg], [odd], begin0=0, begin1=0, begin2=0, begin3=1, begin4=0, step0=1, step1=1, step2=1,
         step3=5, step4=0)
    mx = t([1, 5, 5, 3])
    w.op("MAX_POOL2D", [odd], [mx], kernel_h=2, kernel_w=2, stride_h=1, stride_w=1, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    hs = t([1, 5, 5, 3], 0.04, 7)
    w.op("HARD_SWISH", [mx], [hs], input_zero_point=Z, output_zero_point=7, **qp.hard_swish_params(S, 0.04))
    sig = t([1, 5, 5, 3], 1 / 256, -128)
    lut = qp.lut_from_function(lambda v: 1 / (1 + np.exp(-v)), 0.04, 7, 1 / 256, -128)
    w.op("LUT", [hs, w.constant(lut)], [sig])
    nearest = t([1, 10, 7, 3], 1 / 256, -128)
    w.op("RESIZE_NEAREST", [sig, w.constant(np.array([i // 2 for i in range(10)], np.int32)),
                            w.constant(np.array([i * 5 // 7 for i in range(7)], np.int32))], [nearest])
    ytab = np.array([[i // 2, min(i // 2 + 1, 4), (i % 2) * 512] for i in range(10)], np.int32)
    xtab = np.array([[i * 4 // 6, min(i * 4 // 6 + 1, 4), (i * 4 % 6) * 1024 // 6] for i in range(7)], np.int32)
    bil = t([1, 10, 7, 3], 1 / 256, -128)
    w.op("RESIZE_BILINEAR", [sig, w.constant(ytab), w.constant(xtab)], [bil])
    prod = t([1, 10, 7, 3], 1 / 128, 0)
    w.op("MUL", [nearest, bil], [prod], input1_offset=128, input2_offset=128, output_offset=0,
         output_mult=qp.mul_multiplier(1 / 256, 1 / 256, 1 / 128)[0],
         output_shift=qp.mul_multiplier(1 / 256, 1 / 256, 1 / 128)[1], act_min=-128, act_max=127)
    bias = w.constant(rng.integers(-128, 128, (7, 1), dtype=np.int8), scale=1 / 128, zero_point=0)
    summed = t([1, 10, 7, 3], 1 / 64, 0)
    w.op("ADD", [prod, bias], [summed], input1_offset=0, input2_offset=0, output_offset=0, act_min=-128,
         act_max=127, **qp.add_params(1 / 128, 1 / 128, 1 / 64))
    perm = t([1, 3, 10, 7], 1 / 64, 0)
    w.op("TRANSPOSE", [summed], [perm], perm0=0, perm1=3, perm2=1, perm3=2, perm4=0)
    padded = t([1, 3, 12, 8], 1 / 64, 0)
    w.op("PAD", [perm], [padded], before0=0, before1=0, before2=1, before3=0, before4=0, pad_value=0)
    a, b = t([1, 1, 12, 8], 1 / 64, 0), t([1, 2, 12, 8], 1 / 64, 0)
    w.op("SPLIT", [padded], [a, b], axis=1)
    cat = t([1, 3, 12, 8], 1 / 64, 0)
    w.op("CONCAT", [b, a], [cat], axis=1)
    flat = t([36, 8], 1 / 64, 0)
    w.op("RESHAPE", [cat], [flat])
    req = t([36, 8], 0.1, 5)
    m, s = qp.quantize_multiplier((1 / 64) / 0.1)
    w.op("REQUANTIZE", [flat], [req], input_zero_point=0, output_zero_point=5, mult=m, shift=s)
    w.set_inputs([x])
    w.set_outputs([req, odd])
    return w.to_bytes()


def _one_d() -> bytes:
    """What Conv1d / MaxPool1d / AvgPool1d / AdaptiveAvgPool1d lower to: height-1
    convs, pools and a mean over [N, 1, W, C] (5 channels: not a multiple of 4,
    the S3 max pool's condition), with a causal left pad."""
    rng = np.random.default_rng(11)
    w = Xts3Writer()
    x = w.tensor([1, 1, 40, 3], scale=S, zero_point=Z)
    padded = w.tensor([1, 1, 44, 3], scale=S, zero_point=Z)
    w.op("PAD", [x], [padded], before0=0, before1=0, before2=4, before3=0, before4=0, pad_value=Z)
    conv = w.tensor([1, 1, 40, 5], scale=S, zero_point=Z)
    w.op("CONV2D", [padded, *_conv_inputs(w, rng, 5, 1, 5, 3)], [conv], **_conv_params(groups=1, pad_top=0,
                                                                                       pad_left=0))
    mx = w.tensor([1, 1, 20, 5], scale=S, zero_point=Z)
    w.op("MAX_POOL2D", [conv], [mx], kernel_h=1, kernel_w=3, stride_h=1, stride_w=2, pad_top=0, pad_left=1,
         act_min=-128, act_max=127)
    avg = w.tensor([1, 1, 10, 5], scale=S, zero_point=Z)
    w.op("AVG_POOL2D", [mx], [avg], kernel_h=1, kernel_w=2, stride_h=1, stride_w=2, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    mean = w.tensor([1, 5], scale=0.03, zero_point=1)
    mult, shift = qp.mean_params(S, 0.03, 10)
    w.op("MEAN_HW", [avg], [mean], input_zero_point=Z, output_zero_point=1, mult=mult, shift=shift)
    w.set_inputs([x])
    w.set_outputs([mean, avg])
    return w.to_bytes()


def _quantize_channels_last() -> bytes:
    """Float NCHW inputs quantized straight into NHWC (QUANTIZE's channels_last,
    format version 4): a batch of 2 read by a conv, and a rank-3 [N, C, W] and
    a rank-5 input. The float inputs stay in the arena (not EXTERNAL): the
    runners bind EXTERNAL inputs only from 4-byte aligned memory, and their
    misaligned-bundle test feeds every corpus graph from odd addresses."""
    rng = np.random.default_rng(13)
    w = Xts3Writer()
    outputs, inputs = [], []
    for shape in ([2, 5, 6, 7], [1, 3, 9], [1, 2, 3, 4, 5]):
        x = w.tensor(shape, "FLOAT32")
        q = w.tensor([shape[0], *shape[2:], shape[1]], scale=S, zero_point=Z)
        w.op("QUANTIZE", [x], [q], inv_scale_f32=1.0 / S, zero_point=Z, channels_last=1)
        inputs.append(x)
        outputs.append(q)
    conv = w.tensor([2, 6, 7, 4], scale=S, zero_point=Z)
    w.op("CONV2D", [outputs[0], *_conv_inputs(w, rng, 4, 3, 3, 5)], [conv], **_conv_params(groups=1))
    w.set_inputs(inputs)
    w.set_outputs([conv] + outputs[1:])
    return w.to_bytes()


def _masked_softmax() -> bytes:
    """Causal attention probabilities: MASKED_SOFTMAX of [1, 2, 8, 8] scores under
    a [8, 8] lower-triangular mask with one fully masked row."""
    mask = np.tril(np.ones((8, 8), np.int8))
    mask[3] = 0
    w = Xts3Writer()
    x = w.tensor([1, 2, 8, 8], scale=S, zero_point=Z)
    out = w.tensor([1, 2, 8, 8], scale=1 / 256, zero_point=-128)
    w.op("MASKED_SOFTMAX", [x, w.constant(mask)], [out], **qp.softmax_params(S, 1.0))
    w.set_inputs([x])
    w.set_outputs([out])
    return w.to_bytes()


def _recurrent() -> bytes:
    """A GRU (batch first, 2 sequences of 9 steps) into an LSTM that reads the sequence time
    first (the same bytes as [9, 2, H]), with weights large enough to saturate some gates."""
    rng = np.random.default_rng(29)
    w = Xts3Writer()
    x = w.tensor([2, 9, 5], scale=S, zero_point=Z)
    cur, s_in, zp_in = x, S, Z
    for op, dims, hidden, batch_first in (("GRU", [2, 9, 12], 12, 1), ("LSTM", [9, 2, 7], 7, 0)):
        g = 3 if op == "GRU" else 4
        i = 5 if op == "GRU" else 12
        c = qp.recurrent_params(rng.normal(0, 1.5, (g * hidden, i)).astype(np.float32),
                                rng.normal(0, 1.5, (g * hidden, hidden)).astype(np.float32),
                                rng.normal(0, 0.5, g * hidden).astype(np.float32),
                                rng.normal(0, 0.5, g * hidden).astype(np.float32), s_in, 1 / 128)
        if op == "LSTM":  # the GRU's [2, 9, 12] output read as a time-first [9, 2, 12] sequence
            view = w.tensor([9, 2, 12], scale=s_in, zero_point=zp_in)
            w.op("RESHAPE", [cur], [view])
            cur = view
        out = w.tensor(dims, scale=1 / 128, zero_point=-2)
        w.op(op, [cur] + [w.constant(np.ascontiguousarray(c[k])) for k in
                          ("w_ih", "w_hh", "bias_ih", "bias_hh", "mult_ih", "shift_ih", "mult_hh", "shift_hh",
                           "sigmoid", "tanh")], [out], batch_first=batch_first, **c["params"])
        cur, s_in, zp_in = out, 1 / 128, -2
    w.set_inputs([x])
    w.set_outputs([cur])
    return w.to_bytes()


def _attention_matmuls() -> bytes:
    """BATCH_MATMUL (format version 2) on both rhs layouts: scores = x @ x^T reads x's
    rows as the FC filter in place; scores @ v transposes a broadcast constant v per
    batch into the scratch, with K = 5 (misaligned lhs rows copied)."""
    rng = np.random.default_rng(7)
    w = Xts3Writer()
    x = w.tensor([1, 2, 5, 12], scale=S, zero_point=Z)
    scores = w.tensor([1, 2, 5, 5], scale=0.08, zero_point=4)
    m, e = qp.fc_per_tensor_multiplier(S, S, 0.08)
    w.op("BATCH_MATMUL", [x, x], [scores], lhs_offset=-Z, rhs_offset=-Z, output_offset=4, mult=m, shift=e,
         act_min=-128, act_max=127, rhs_transposed=1)
    v = w.constant(rng.integers(-128, 128, (1, 1, 5, 7), dtype=np.int8), scale=0.02, zero_point=-9)
    out = w.tensor([1, 2, 5, 7], scale=0.1, zero_point=0)
    m, e = qp.fc_per_tensor_multiplier(0.08, 0.02, 0.1)
    w.op("BATCH_MATMUL", [scores, v], [out], lhs_offset=-4, rhs_offset=9, output_offset=0, mult=m, shift=e,
         act_min=-100, act_max=127, rhs_transposed=0)
    w.set_inputs([x])
    w.set_outputs([out])
    return w.to_bytes()


def _norms() -> bytes:
    """LAYER_NORM (format version 2, so kept out of the version-1 graph above):
    a layer norm with gamma and beta over a rank-3 tensor, then an RMS norm
    with one gamma, as in a transformer block; and a layer norm over 3000-wide
    rows with eps = 0 (large integer variance, the 64-bit paths)."""
    rng = np.random.default_rng(18)
    w = Xts3Writer()
    x = w.tensor([2, 5, 24], scale=S, zero_point=Z)
    ln = qp.layer_norm_params(S, 0.03, 1e-5, 24, rng.normal(1, 0.3, 24), rng.normal(0, 0.2, 24))
    y = w.tensor([2, 5, 24], scale=0.03, zero_point=2)
    w.op("LAYER_NORM", [x, w.constant(ln["gamma_mult"]), w.constant(ln["gamma_shift"]), w.constant(ln["beta"])],
         [y], act_min=-128, act_max=127, **ln["params"])
    rms = qp.layer_norm_params(0.03, 0.02, 1e-6, 24, None, None, rms=True)
    z = w.tensor([2, 5, 24], scale=0.02, zero_point=0)
    w.op("LAYER_NORM", [y, w.constant(rms["gamma_mult"]), w.constant(rms["gamma_shift"]), None], [z],
         act_min=-128, act_max=127, **rms["params"])
    wide = w.tensor([2, 3000], scale=0.5, zero_point=-128)
    wide_ln = qp.layer_norm_params(0.5, 1 / 32, 0.0, 3000)  # one gamma, no beta: a small blob
    wide_out = w.tensor([2, 3000], scale=1 / 32, zero_point=0)
    w.op("LAYER_NORM", [wide, w.constant(wide_ln["gamma_mult"]), w.constant(wide_ln["gamma_shift"]), None],
         [wide_out], act_min=-128, act_max=127, **wide_ln["params"])
    w.set_inputs([x, wide])
    w.set_outputs([z, wide_out])
    return w.to_bytes()


def _random_norm(seed: int, shape: tuple[int, ...], rms: bool, affine: int) -> bytes:
    """One LAYER_NORM with random quantization, eps and gamma/beta (affine: 0 none,
    1 gamma, 2 gamma and beta), so that the 32-bit, sanitizer and Xtensa runs
    compare its arithmetic over several widths with the 64-bit build."""
    rng = np.random.default_rng(seed)
    width = shape[-1]
    s_in, s_out = float(10 ** rng.uniform(-3, 0)), float(10 ** rng.uniform(-2.5, -0.5))
    zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, 2))
    gamma = rng.normal(1.0, 0.5, width) if affine else None
    beta = rng.normal(0.0, 0.5, width) if affine == 2 else None
    p = qp.layer_norm_params(s_in, s_out, float(rng.choice([1e-5, 1e-3, 0.1])), width, gamma, beta, rms)
    w = Xts3Writer()
    x, y = w.tensor(list(shape), scale=s_in, zero_point=zp_in), w.tensor(list(shape), scale=s_out, zero_point=zp_out)
    b = w.constant(p["beta"]) if p["beta"] is not None else None
    w.op("LAYER_NORM", [x, w.constant(p["gamma_mult"]), w.constant(p["gamma_shift"]), b], [y],
         act_min=-128, act_max=127, **p["params"])
    w.set_inputs([x])
    w.set_outputs([y])
    return w.to_bytes()


def _per_channel_tables() -> bytes:
    """prelu with a slope per channel, in place over a dying input: CHANNEL_LUT
    along the channels of an NHWC tensor and along dimension 1 of a [N, C, L] one."""
    w = Xts3Writer()
    x = w.tensor([1, 3, 4, 5], scale=S, zero_point=Z)
    a = w.tensor([1, 3, 4, 5], scale=0.1, zero_point=2)
    m, s = qp.quantize_multiplier(S / 0.1)
    w.op("REQUANTIZE", [x], [a], input_zero_point=Z, output_zero_point=2, mult=m, shift=s)

    def prelu_tables(slopes):
        return np.stack([qp.lut_from_function(lambda v, k=k: np.where(v >= 0, v, k * v), 0.1, 2, 0.08, -5)
                         for k in slopes])

    nhwc = w.tensor([1, 3, 4, 5], scale=0.08, zero_point=-5)
    w.op("CHANNEL_LUT", [a, w.constant(prelu_tables(np.linspace(-1, 1, 5)))], [nhwc], axis=3)
    ncl = w.tensor([1, 3, 20], scale=0.08, zero_point=-5)
    flat = w.tensor([1, 3, 20], scale=S, zero_point=Z)
    w.op("RESHAPE", [x], [flat])
    w.op("CHANNEL_LUT", [flat, w.constant(prelu_tables([0.25, 0.0, 2.0]))], [ncl], axis=1)
    w.set_inputs([x])
    w.set_outputs([nhwc, ncl])
    return w.to_bytes()


def _fused_graphs() -> Iterator[tuple[str, bytes]]:
    """Fused regions (BAND_LOOP): an inverted residual block (stride 1 with
    its residual ADD, and stride 2), an in-place depthwise, random chains
    (stride 2, dilation, pads at the borders) at a few band heights,
    upsampling chains (resizes, transposed convs, CONCATs), a U-Net
    decoder level, and a squeeze-excite block: expansion fused up to the
    scaled map, then the channel scale, projection and residual in place
    over that map."""
    from . import band_graphs as bg
    from executorch_espnn.memory import FusedRegion

    for stride in (1, 2):
        w, n = bg.inverted_residual(stride=stride, seed=stride)
        yield f"fused_inverted_residual_s{stride}", w.to_bytes(w.plan([FusedRegion(0, n, 2)]))
    w, _ = bg.inverted_residual(expand=8)
    yield "fused_in_place_depthwise", w.to_bytes(w.plan([FusedRegion(1, 1, 1, in_place=True)]))
    for seed in range(4):
        w, n = bg.random_chain(seed)
        for rows in (1, 3):
            yield f"fused_chain{seed}_rows{rows}", w.to_bytes(w.plan([FusedRegion(0, n, rows)]))
    for seed in range(3):
        w, n = bg.upsampling_chain(seed)
        yield f"fused_upsampling{seed}_rows2", w.to_bytes(w.plan([FusedRegion(0, n, 2)]))
    w, first, n = bg.unet_decoder()
    yield "fused_unet_decoder", w.to_bytes(w.plan([FusedRegion(first, n, 1)]))
    w, at = bg.squeeze_excite(seed=5)
    scale = FusedRegion(at["mul"], at["last"] - at["mul"] + 1, 2, in_place=True)
    yield "fused_squeeze_excite", w.to_bytes(w.plan([FusedRegion(0, at["mean"], 2), scale]))


def _dequantize_channels_last() -> bytes:
    """int8 NHWC results dequantized straight into NCHW float graph outputs
    (DEQUANTIZE's channels_last, format version 5), rank 3, 4 and 5, each
    output EXTERNAL (the caller's buffer, Interpreter::BindOutput) as the
    lowering makes it; one plain DEQUANTIZE output stays in the arena because
    a later op reads it."""
    w = Xts3Writer()
    inputs, outputs = [], []
    for shape in ([2, 6, 7, 5], [1, 9, 3], [1, 3, 4, 5, 2]):
        x = w.tensor(shape, scale=S, zero_point=Z)
        y = w.tensor([shape[0], shape[-1], *shape[1:-1]], "FLOAT32")
        w.op("DEQUANTIZE", [x], [y], scale_f32=S, zero_point=Z, channels_last=1)
        inputs.append(x)
        outputs.append(y)
    f = w.tensor([2, 6, 7, 5], "FLOAT32")
    w.op("DEQUANTIZE", [inputs[0]], [f], scale_f32=S, zero_point=Z)
    q = w.tensor([2, 6, 7, 5], scale=2 * S, zero_point=0)
    w.op("QUANTIZE", [f], [q], inv_scale_f32=1.0 / (2 * S), zero_point=0)
    w.set_inputs(inputs)
    w.set_outputs(outputs + [f, q])
    w.mark_external_outputs()
    return w.to_bytes()


def op_graphs() -> Iterator[tuple[str, bytes]]:
    yield "selfcheck_cnn", selfcheck.build(np.random.default_rng(2026))[0]
    yield "every_other_op", _everything_else()
    yield "attention_matmuls", _attention_matmuls()
    yield "norms", _norms()
    yield "per_channel_tables", _per_channel_tables()
    yield "one_d_pools", _one_d()
    yield "masked_softmax", _masked_softmax()
    yield "quantize_channels_last", _quantize_channels_last()
    yield "dequantize_channels_last", _dequantize_channels_last()
    yield "recurrent", _recurrent()
    for i, (shape, rms, affine) in enumerate([((3, 1), False, 2), ((2, 2, 7), True, 1), ((4, 64), False, 0),
                                              ((1, 2, 1, 257), False, 2), ((5, 33), True, 0)]):
        yield f"norm_random{i}", _random_norm(100 + i, shape, rms, affine)
    yield from _fused_graphs()


def opcodes_used() -> set[str]:
    return {op["op"] for _, blob in op_graphs() for op in _native.parse(blob)["ops"]}


def bundle_cases(runs: int = 0) -> list:
    """The op corpus and the parser tests' valid blobs as
    bundle cases with the host runtime's expected outputs: what every runner
    (host, lx106, ESP-IDF linux, a board) must reproduce bit-exactly."""
    from . import xts3_mutations as xm

    from executorch_espnn import bundle

    cases = [bundle.make_case(name, blob, seed=i, runs=runs) for i, (name, blob) in enumerate(op_graphs())]
    cases += [bundle.make_case(v.name, v.blob, v.feeds, runs=runs) for v in xm.valid_blobs()]
    return cases
