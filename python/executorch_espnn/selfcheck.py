"""Runtime self-check: ``python -m executorch_espnn.selfcheck``.

Builds a small int8 CNN as an XTS3 graph (quantize -> conv+ReLU -> max pool
-> depthwise conv -> 1x1 conv -> global average pool -> fully connected ->
softmax -> dequantize), validates it with the native parser, runs it on the
native interpreter (the device C++ compiled for the host) and compares the
class probabilities with the same network evaluated in float64 numpy.

The float network's activation ranges calibrate the int8 scales, the way a
PT2E observer would. This is a demonstration of the runtime until the
lowering lands; it exits non-zero if the int8 result strays from the float
one more than int8 quantization explains.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import _native
from . import quant_params as qp
from .xts3_writer import Xts3Writer


def _conv_f(x, w, b, stride=1, pad=0, groups=1):
    """Float NHWC conv; w is OHWI [Cout, kh, kw, Cin/groups]."""
    x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    cout, kh, kw, cig = w.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
    # win: [N, OH, OW, Cin, kh, kw]
    opg = cout // groups
    outs = []
    for g in range(groups):
        xs = win[:, :, :, g * cig:(g + 1) * cig]
        outs.append(np.einsum("nhwcij,oijc->nhwo", xs, w[g * opg:(g + 1) * opg]))
    return np.concatenate(outs, axis=-1) + b


def _qparams(t: np.ndarray) -> tuple[float, int]:
    """Asymmetric int8 scale/zero point covering t's range (and 0)."""
    lo, hi = min(float(t.min()), 0.0), max(float(t.max()), 0.0)
    scale = qp.f32(max(hi - lo, 1e-8) / 255.0)
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return scale, zp


def _sym_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel symmetric int8 weights (axis 0 or last for depthwise)."""
    axes = tuple(range(1, w.ndim))
    s = np.maximum(np.abs(w).max(axis=axes), 1e-8) / 127.0
    s = s.astype(np.float32)
    q = np.clip(np.round(w / s.reshape((-1,) + (1,) * (w.ndim - 1))), -127, 127).astype(np.int8)
    return q, s


def build(rng: np.random.Generator):
    x = rng.standard_normal((1, 16, 16, 3)).astype(np.float32)
    w1 = rng.standard_normal((8, 3, 3, 3)) * 0.3
    b1 = rng.standard_normal(8) * 0.1
    wd = rng.standard_normal((8, 3, 3, 1)) * 0.3  # depthwise as [C, kh, kw, 1] (groups = C)
    bd = rng.standard_normal(8) * 0.1
    w2 = rng.standard_normal((16, 1, 1, 8)) * 0.3
    b2 = rng.standard_normal(16) * 0.1
    wf = rng.standard_normal((10, 16)) * 0.5
    bf = rng.standard_normal(10) * 0.1

    # Float reference network (also gives the calibration ranges).
    a1 = np.maximum(_conv_f(x.astype(np.float64), w1, b1, pad=1), 0)
    p1 = a1.reshape(1, 8, 2, 8, 2, 8).max(axis=(2, 4))
    d1 = _conv_f(p1, wd, bd, pad=1, groups=8)
    c2 = _conv_f(d1, w2, b2)
    g = c2.mean(axis=(1, 2))
    logits = g @ wf.T + bf
    e = np.exp(logits[0] - logits.max())
    probs = e / e.sum()

    s_x, z_x = _qparams(x)
    s_a1, z_a1 = _qparams(a1)
    s_d1, z_d1 = _qparams(d1)
    s_c2, z_c2 = _qparams(c2)
    s_g, z_g = _qparams(g)
    s_l, z_l = _qparams(logits)

    w = Xts3Writer()
    tx = w.tensor(x.shape, "FLOAT32")
    tq = w.tensor(x.shape, "INT8", scale=s_x, zero_point=z_x)
    w.op("QUANTIZE", [tx], [tq], inv_scale_f32=1.0 / s_x, zero_point=z_x)

    def conv(op, src, s_in, z_in, wt, b, s_out, z_out, out_shape, act, **geom):
        q, s_w = _sym_weights(wt)
        if op == "DEPTHWISE_CONV2D":  # [C, kh, kw, 1] -> TFLite [1, kh, kw, C]
            q = np.ascontiguousarray(q.transpose(3, 1, 2, 0))
        mult, shift = qp.conv_multipliers(s_in, s_w, s_out)
        bias = np.round(b / (np.float64(s_in) * s_w)).astype(np.int32)
        lo, hi = qp.activation_range(act, s_out, z_out)
        dst = w.tensor(out_shape, "INT8", scale=s_out, zero_point=z_out)
        extra = dict(groups=1) if op == "CONV2D" else dict(ch_mult=1)
        w.op(op, [src, w.constant(q), w.constant(bias), w.constant(mult), w.constant(shift)], [dst],
             stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, input_offset=-z_in, output_offset=z_out,
             act_min=lo, act_max=hi, **geom, **extra)
        return dst

    t1 = conv("CONV2D", tq, s_x, z_x, w1, b1, s_a1, z_a1, (1, 16, 16, 8), qp.ACT_RELU, pad_top=1, pad_left=1)
    tp = w.tensor((1, 8, 8, 8), "INT8", scale=s_a1, zero_point=z_a1)
    w.op("MAX_POOL2D", [t1], [tp], kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    td = conv("DEPTHWISE_CONV2D", tp, s_a1, z_a1, wd, bd, s_d1, z_d1, (1, 8, 8, 8), qp.ACT_NONE,
              pad_top=1, pad_left=1)
    t2 = conv("CONV2D", td, s_d1, z_d1, w2, b2, s_c2, z_c2, (1, 8, 8, 16), qp.ACT_NONE, pad_top=0, pad_left=0)
    tg = w.tensor((1, 1, 1, 16), "INT8", scale=s_g, zero_point=z_g)
    m, s = qp.mean_params(s_c2, s_g, 64)
    w.op("MEAN_HW", [t2], [tg], input_zero_point=z_c2, output_zero_point=z_g, mult=m, shift=s)
    tr = w.tensor((1, 16), "INT8", scale=s_g, zero_point=z_g)
    w.op("RESHAPE", [tg], [tr])
    qf, s_wf = _sym_weights(wf)
    mult, shift = qp.conv_multipliers(s_g, s_wf, s_l)
    tl = w.tensor((1, 10), "INT8", scale=s_l, zero_point=z_l)
    w.op("FULLY_CONNECTED", [tr, w.constant(qf), w.constant(np.round(bf / (np.float64(s_g) * s_wf)).astype(np.int32)),
                             w.constant(mult), w.constant(shift)], [tl],
         input_offset=-z_g, filter_offset=0, output_offset=z_l, act_min=-128, act_max=127)
    ts = w.tensor((1, 10), "INT8", scale=1 / 256, zero_point=-128)
    w.op("SOFTMAX", [tl], [ts], **qp.softmax_params(s_l))
    ty = w.tensor((1, 10), "FLOAT32")
    w.op("DEQUANTIZE", [ts], [ty], scale_f32=1 / 256, zero_point=-128)
    w.set_inputs([tx])
    w.set_outputs([ty])
    return w.to_bytes(), x, probs


def main() -> int:
    print(f"executorch-espnn runtime self-check (XTS3 v{_native.FORMAT_VERSION})")
    print(f"ESP-NN kernels: {_native.KERNEL_SOURCE}")
    blob, x, probs = build(np.random.default_rng(2026))
    prog = _native.Program(blob)
    summary = prog.summary()
    print(f"blob {len(blob)} B, {len(summary['ops'])} ops, {len(summary['tensors'])} tensors, "
          f"arena {prog.arena_bytes} B, scratch {prog.scratch_bytes} B")
    print("ops: " + " -> ".join(op["op"] for op in summary["ops"]))
    (y,) = prog.run([x])
    runs = 200
    t0 = time.perf_counter()
    for _ in range(runs):
        (y2,) = prog.run([x])
    dt = (time.perf_counter() - t0) / runs
    max_err = float(np.abs(y[0] - probs).max())
    print(f"host invoke: {dt * 1e6:.0f} us (x86-64 host, not a device figure)")
    print(f"int8 probs:  {np.array2string(y[0], precision=3)}")
    print(f"float probs: {np.array2string(probs.astype(np.float32), precision=3)}")
    print(f"max |int8 - float| = {max_err:.4f}; top-1 int8 {int(y[0].argmax())}, float {int(probs.argmax())}")
    # int8 softmax output has a 1/256 step; its top class must be a float top
    # class up to that resolution.
    top1_ok = probs[int(y[0].argmax())] >= probs.max() - 2 / 256
    ok = np.array_equal(y, y2) and max_err < 4 / 256 and top1_ok
    print("self-check: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
