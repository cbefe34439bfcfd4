"""GRU and LSTM: one layer over a whole int8 sequence.

Oracle: the integer formulas of docs/xts3-format.md (GRU and LSTM), written
here in numpy int64 from the document (gate rows through TFLite's MBQM to
Q3.12, the tables interpolated, the Q0.15 state, the Q4.11 cell); bit-exact
on random weights, multipliers and sequences (batch first or not, several
sequences, saturating pre-activations and cells). The float side: PyTorch's
nn.GRU / nn.LSTM on the dequantized input within a stated bound. Rejections
of malformed records.
"""

import numpy as np
import pytest
import torch

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from espnn_dev.graph_util import Const, Input, Out, build_op, expect_rejected, run_op
from support.tflite_reference import mbqm

GATES = {"GRU": 3, "LSTM": 4}


def sat16(v):
    return np.clip(v, -32768, 32767)


def round_shift(v, k):
    return (np.asarray(v, np.int64) + (1 << (k - 1))) >> k


def table(t, x):
    u = np.asarray(x, np.int64) + 32768
    k, frac = u >> 8, u & 255
    lo, hi = t[k], t[k + 1]
    return lo + round_shift((hi - lo) * frac, 8)


def oracle(kind, x, c, x_zp, y_zp, batch_first, seen=None):
    """The documented integer recurrence, element by element over gate rows. `seen`, if
    given, receives the largest |pre-activation| and |cell| reached."""
    x = x.astype(np.int64)
    seq = x if batch_first else x.transpose(1, 0, 2)  # [B, T, I]
    B, T, _ = seq.shape
    wih, whh = c["w_ih"].astype(np.int64), c["w_hh"].astype(np.int64)
    H = whh.shape[1]
    sig, tnh = c["sigmoid"].astype(np.int64), c["tanh"].astype(np.int64)
    m, e = c["params"]["state_mult"], c["params"]["state_shift"]
    y = np.zeros((B, T, H), np.int64)
    for b in range(B):
        h = np.zeros(H, np.int64)
        cell = np.zeros(H, np.int64)
        for t in range(T):
            gx = sat16(mbqm(wih @ (seq[b, t] - x_zp) + c["bias_ih"], c["mult_ih"], c["shift_ih"]))
            acc_h = c["bias_hh"].astype(np.int64) + (0 if t == 0 else whh @ (y[b, t - 1] - y_zp))
            gh = sat16(mbqm(acc_h, c["mult_hh"], c["shift_hh"]))
            pre = [sat16(gx[k * H:(k + 1) * H] + gh[k * H:(k + 1) * H]) for k in range(GATES[kind])]
            if seen is not None:
                seen["pre"] = max(seen.get("pre", 0), int(np.abs(np.concatenate(pre)).max()))
            if kind == "GRU":
                r, z = table(sig, pre[0]), table(sig, pre[1])
                n = table(tnh, sat16(gx[2 * H:] + round_shift(r * gh[2 * H:], 15)))
                h = round_shift((32768 - z) * n + z * h, 15)
            else:
                i, f, g, o = table(sig, pre[0]), table(sig, pre[1]), table(tnh, pre[2]), table(sig, pre[3])
                cell = sat16(round_shift(f * cell, 15) + round_shift(i * g, 19))
                if seen is not None:
                    seen["cell"] = max(seen.get("cell", 0), int(np.abs(cell).max()))
                h = round_shift(o * table(tnh, sat16(cell * 2)), 15)
            y[b, t] = np.clip(mbqm(h, m, e) + y_zp, -128, 127)
    y = y if batch_first else y.transpose(1, 0, 2)
    return y.astype(np.int8)


def make_layer(kind, rng, in_size, hidden, s_in, s_out, weight_scale=0.3, bias=True):
    g = GATES[kind]
    w_ih = rng.normal(0, weight_scale, (g * hidden, in_size)).astype(np.float32)
    w_hh = rng.normal(0, weight_scale, (g * hidden, hidden)).astype(np.float32)
    b_ih = rng.normal(0, 0.2, g * hidden).astype(np.float32) if bias else None
    b_hh = rng.normal(0, 0.2, g * hidden).astype(np.float32) if bias else None
    return (w_ih, w_hh, b_ih, b_hh), qp.recurrent_params(w_ih, w_hh, b_ih, b_hh, s_in, s_out)


def op_inputs(x, c, s_in, x_zp, tables=None):
    sig, tnh = tables if tables is not None else (c["sigmoid"], c["tanh"])
    return [Input(x, s_in, x_zp)] + [Const(np.ascontiguousarray(c[k])) for k in
                                     ("w_ih", "w_hh", "bias_ih", "bias_hh", "mult_ih", "shift_ih",
                                      "mult_hh", "shift_hh")] + [Const(sig), Const(tnh)]


def run_layer(kind, x, c, s_in, x_zp, s_out, y_zp, batch_first, **overrides):
    hidden = c["w_hh"].shape[1]
    shape = (*x.shape[:2], hidden)
    params = dict(c["params"], batch_first=int(batch_first), **overrides)
    return run_op(kind, op_inputs(x, c, s_in, x_zp), Out(shape, "INT8", s_out, y_zp), **params)


# (kind, [B, T, I] as stored, hidden, batch_first, input scale, weight scale): a keyword
# spotter's shape, several sequences time-major, one step, a large hidden size, weights
# and inputs large enough that pre-activations and LSTM cells saturate.
CASES = [
    ("GRU", (1, 49, 10), 64, True, 0.03, 0.3),
    ("GRU", (7, 3, 5), 16, False, 0.05, 0.5),
    ("GRU", (2, 1, 9), 8, True, 0.05, 0.3),
    ("GRU", (1, 12, 33), 96, True, 0.1, 2.0),
    ("LSTM", (1, 49, 10), 64, True, 0.03, 0.3),
    ("LSTM", (6, 3, 4), 12, False, 0.05, 0.5),
    ("LSTM", (3, 20, 7), 24, True, 0.2, 2.0),
    ("LSTM", (1, 1, 1), 1, True, 0.05, 0.3),
]


@pytest.mark.parametrize("kind,shape,hidden,batch_first,s_in,w_scale", CASES)
def test_matches_the_integer_oracle(kind, shape, hidden, batch_first, s_in, w_scale):
    rng = np.random.default_rng(hidden * 7 + shape[1])
    s_out, y_zp, x_zp = 1 / 128, int(rng.integers(-10, 10)), int(rng.integers(-20, 20))
    _, c = make_layer(kind, rng, shape[2], hidden, s_in, s_out, w_scale)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    got = run_layer(kind, x, c, s_in, x_zp, s_out, y_zp, batch_first)
    np.testing.assert_array_equal(got, oracle(kind, x, c, x_zp, y_zp, batch_first))


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_saturation_is_reached_and_stays_exact(kind):
    """Pre-activations beyond +-8 (Q3.12 saturates at 32767) and, for LSTM, cells beyond +-16:
    a large push on every gate (GRU: z pushed down, so h follows n) over a long sequence; the
    output still matches the oracle and reaches the top of the int8 range."""
    rng = np.random.default_rng(5)
    hidden = 8
    _, c = make_layer(kind, rng, 6, hidden, 0.5, 1 / 128, weight_scale=4.0)
    push = np.full(c["bias_ih"].shape, 2**20, np.int32)
    if kind == "GRU":
        push[hidden:2 * hidden] = -2**20
    c["bias_ih"] = push
    x = rng.integers(-128, 128, (2, 60, 6), dtype=np.int8)
    got = run_layer(kind, x, c, 0.5, 0, 1 / 128, 0, True)
    seen = {}
    np.testing.assert_array_equal(got, oracle(kind, x, c, 0, 0, True, seen))
    assert seen["pre"] == 32768 or seen["pre"] == 32767
    if kind == "LSTM":
        assert seen["cell"] >= 32767
    assert got.max() >= 120


@pytest.mark.parametrize("kind,module", [("GRU", torch.nn.GRU), ("LSTM", torch.nn.LSTM)])
def test_close_to_pytorch_in_float(kind, module):
    """Against PyTorch's own module on the dequantized input and the dequantized per-row
    int8 weights (so that what is measured is the kernel's arithmetic: the int8 w_hh input,
    Q3.12 pre-activations, interpolated tables, the Q0.15 state): the int8 output within
    2 LSB of the float output quantized, most elements exact."""
    rng = np.random.default_rng(11)
    s_in, s_out, zp = 0.03, 1 / 128, 0
    (w_ih, w_hh, b_ih, b_hh), c = make_layer(kind, rng, 10, 32, s_in, s_out)
    x = rng.integers(-128, 128, (2, 30, 10), dtype=np.int8)
    got = run_layer(kind, x, c, s_in, zp, s_out, zp, True).astype(np.int32)
    m = module(10, 32, batch_first=True)
    with torch.no_grad():
        deq = [q.astype(np.float32) * s[:, None] for q, s in (qp._per_row_int8(w_ih), qp._per_row_int8(w_hh))]
        for name, v in (("weight_ih_l0", deq[0]), ("weight_hh_l0", deq[1]), ("bias_ih_l0", b_ih),
                        ("bias_hh_l0", b_hh)):
            getattr(m, name).copy_(torch.from_numpy(v))
        ref = m(torch.from_numpy(x.astype(np.float32) * s_in))[0].numpy()
    want = np.clip(np.round(ref / s_out) + zp, -128, 127)
    diff = np.abs(got - want)
    assert diff.max() <= 2, diff.max()
    assert (diff == 0).mean() > 0.6


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_last_step_output_is_the_sequences_last_step(kind, batch_first):
    """An output with a time dim of 1 holds y_{T-1} of every sequence, byte for byte."""
    rng = np.random.default_rng(17)
    s_in, s_out = 0.05, 1 / 128
    _, c = make_layer(kind, rng, 6, 20, s_in, s_out, 0.8)
    shape = (3, 11, 6) if batch_first else (11, 3, 6)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    whole = run_layer(kind, x, c, s_in, 4, s_out, -5, batch_first)
    last_shape = (3, 1, 20) if batch_first else (1, 3, 20)
    got = run_op(kind, op_inputs(x, c, s_in, 4), Out(last_shape, "INT8", s_out, -5),
                 **dict(c["params"], batch_first=int(batch_first)))
    want = whole[:, -1:] if batch_first else whole[-1:]
    np.testing.assert_array_equal(got, want)


def test_payload_does_not_grow_with_the_sequence():
    """One record loops over the steps: 49 and 98 frames give blobs of the same size."""
    rng = np.random.default_rng(3)
    _, c = make_layer("GRU", rng, 10, 64, 0.03, 1 / 128)
    sizes = []
    for steps in (49, 98):
        x = np.zeros((1, steps, 10), np.int8)
        blob, _ = build_op("GRU", op_inputs(x, c, 0.03, 0), [Out((1, steps, 64), "INT8", 1 / 128, 0)],
                           **dict(c["params"], batch_first=1))
        sizes.append(len(blob))
    assert sizes[0] == sizes[1]


def _blob(kind="GRU", mutate=None, out_shape=None, **params):
    rng = np.random.default_rng(0)
    _, c = make_layer(kind, rng, 4, 6, 0.05, 1 / 128)
    if mutate:
        mutate(c)
    x = np.zeros((1, 5, 4), np.int8)
    p = dict(c["params"], batch_first=1)
    p.update(params)
    blob, _ = build_op(kind, op_inputs(x, c, 0.05, 0), [Out(out_shape or (1, 5, 6), "INT8", 1 / 128, 0)], **p)
    return blob


def test_a_well_formed_record_parses():
    _native.Program(_blob("GRU"))
    _native.Program(_blob("LSTM"))


@pytest.mark.parametrize("mutate,params,out_shape,fragment", [
    (lambda c: c.update(sigmoid=c["sigmoid"][:-1]), {}, None, "sigmoid table"),
    (lambda c: c.update(tanh=np.concatenate([c["tanh"][:-1], [40000]]).astype(np.int32)), {}, None, "tanh table"),
    (lambda c: c.update(sigmoid=(c["sigmoid"] - 20).astype(np.int32)), {}, None, "sigmoid table"),
    (lambda c: c.update(w_ih=c["w_ih"][:-1]), {}, None, "w_ih"),
    (lambda c: c.update(w_hh=c["w_hh"][:, :-1]), {}, None, "w_hh"),
    (lambda c: c.update(shift_hh=(c["shift_hh"] * 0 + 31).astype(np.int32)), {}, None, "shift_hh"),
    (lambda c: c.update(bias_ih=c["bias_ih"][:3]), {}, None, "bias_ih"),
    (None, {"batch_first": 2}, None, "batch_first"),
    (None, {"state_shift": 40}, None, "state_shift"),
    (None, {}, (1, 4, 6), "does not match"),
    (None, {}, (1, 2, 6), "does not match"),
    (None, {}, (2, 5, 6), "does not match"),
    (None, {}, (1, 5, 7), "w_ih is [18, 4], expected [21, 4]"),
])
def test_malformed_records_are_refused(mutate, params, out_shape, fragment):
    expect_rejected(_blob("GRU", mutate, out_shape, **params), fragment)


def test_lstm_needs_four_gates_of_rows():
    """A GRU's [3H, .] weights under an LSTM opcode are refused."""
    rng = np.random.default_rng(0)
    _, c = make_layer("GRU", rng, 4, 6, 0.05, 1 / 128)
    x = np.zeros((1, 5, 4), np.int8)
    blob, _ = build_op("LSTM", op_inputs(x, c, 0.05, 0), [Out((1, 5, 6), "INT8", 1 / 128, 0)],
                       **dict(c["params"], batch_first=1))
    expect_rejected(blob, "w_ih")
