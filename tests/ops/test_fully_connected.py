"""FULLY_CONNECTED through the native interpreter (single-op XTS3 graphs).

Oracles, all independent of the C++ under test:
* the ESP-NN 1.2.3 golden vectors (fully_connected_s8 / _per_ch_s8), bit-exact;
* TFLite's integer FullyConnected written below in numpy int64, bit-exact:
  acc = sum((w + filter_offset)(x + input_offset)) + bias[o],
  y = clamp(MBQM(acc, mult[o], shift[o]) + output_offset, act_min, act_max),
  MBQM = RDBP(SRDHM(acc * 2^max(s,0), m), max(-s,0)) (double rounding, from
  tests/support/tflite_reference.py);
* PyTorch's quantized linear (QNNPACK, exact on every host) within 1 LSB, with the ESP-NN
  parameters derived here from float scales as esp-tflite-micro does
  (reference/espnn-kernels.md section 8).
Plus rejection tests: a malformed op must fail to load with a message naming
the field.
"""

from __future__ import annotations


import numpy as np
import pytest

from executorch_espnn import _native
from espnn_dev.graph_util import Const, Input, Out, build_op, rejection_message, run_op
from support.tflite_reference import activation_range, in_int32, mbqm, quantize_multiplier


# ---- oracle: TFLite integer FullyConnected in numpy int64 -----------------------------


def fc_reference(x, w, bias, mult, shift, p):
    """x [..., row_len] int8, w [out, row_len] int8 -> [..., out] int8."""
    xs = x.astype(np.int64) + p["input_offset"]
    ws = w.astype(np.int64) + p["filter_offset"]
    acc = xs @ ws.T
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    in_int32(acc)
    out_ch = w.shape[0]
    m = np.broadcast_to(np.asarray(mult, np.int64), (out_ch,))
    s = np.broadcast_to(np.asarray(shift, np.int64), (out_ch,))
    y = mbqm(acc, m, s, wrap=False) + p["output_offset"]
    return np.clip(y, p["act_min"], p["act_max"]).astype(np.int8)


# ---- helpers -------------------------------------------------------------------------


def fc_params(input_offset=0, filter_offset=0, output_offset=0, act_min=-128, act_max=127):
    return dict(input_offset=input_offset, filter_offset=filter_offset, output_offset=output_offset,
                act_min=act_min, act_max=act_max)


def run_fc(x, w, bias, mult, shift, **params):
    out_shape = tuple(x.shape[:-1]) + (w.shape[0],)
    inputs = [Input(x), Const(w), None if bias is None else Const(np.asarray(bias, np.int32)),
              Const(np.asarray(mult, np.int32).reshape(-1)), Const(np.asarray(shift, np.int32).reshape(-1))]
    return run_op("FULLY_CONNECTED", inputs, Out(out_shape), **params)


def load_error(inputs, out_shape, **params) -> str:
    blob, _ = build_op("FULLY_CONNECTED", inputs, [Out(out_shape)], **params)
    return rejection_message(blob)


# ---- golden vectors (ESP-NN 1.2.3 ANSI), bit-exact ---------------------------------


@pytest.mark.parametrize("name", ["fully_connected_s8.npz", "fully_connected_per_ch_s8.npz"])
def test_golden_vectors(vectors_dir, name):
    z = np.load(vectors_dir / name)
    fields = z["params_fields"].tolist()
    n = int(z["num_cases"])
    assert n == 60
    failures = []
    for i in range(n):
        p = dict(zip(fields, z[f"c{i}_params"].tolist()))
        x = z[f"c{i}_input"].reshape(p["batch"], p["row_len"])
        w = z[f"c{i}_filter"].reshape(p["out_ch"], p["row_len"])
        bias = z[f"c{i}_bias"] if p["has_bias"] else None
        got = run_fc(x, w, bias, z[f"c{i}_mult"], z[f"c{i}_shift"],
                     **fc_params(p["in_offset"], p["filter_offset"], p["out_offset"], p["act_min"], p["act_max"]))
        want = z[f"c{i}_output"].reshape(p["batch"], p["out_ch"])
        if not np.array_equal(got, want):
            failures.append(f"case {i} ({z[f'c{i}_note']}): {int((got != want).sum())} elements differ")
    assert not failures, "\n".join(failures)


def test_golden_vectors_cover_both_paths(vectors_dir):
    # the per-channel file must reach esp_nn_fully_connected_per_ch_s8 (mult length = out_ch > 1)
    z = np.load(vectors_dir / "fully_connected_per_ch_s8.npz")
    assert any(z[f"c{i}_mult"].size > 1 for i in range(int(z["num_cases"])))
    z = np.load(vectors_dir / "fully_connected_s8.npz")
    assert all(z[f"c{i}_mult"].size == 1 for i in range(int(z["num_cases"])))


# ---- exact TFLite formulas ------------------------------------------------------------


def _random_fc(rng, lead, row_len, out_ch, per_channel, has_bias=True, shift_range=(-12, -6)):
    x = rng.integers(-128, 128, size=lead + (row_len,), dtype=np.int8)
    w = rng.integers(-127, 128, size=(out_ch, row_len), dtype=np.int8)
    bias = rng.integers(-20000, 20000, size=out_ch).astype(np.int32) if has_bias else None
    k = out_ch if per_channel else 1
    mult = rng.integers(2**30, 2**31 - 1, size=k).astype(np.int32)
    shift = rng.integers(shift_range[0], shift_range[1] + 1, size=k).astype(np.int32)
    return x, w, bias, mult, shift


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize(
    "lead,row_len,out_ch",
    [
        ((), 37, 5),            # rank-1 input: one row
        ((3,), 5, 4),           # batch rows not 16-byte aligned (row copy into scratch)
        ((2, 3), 20, 7),        # batch = product of the leading dims
        ((1, 2, 2), 64, 3),     # rank 4, aligned rows
        ((2,), 33, 300),        # more than one ESP-NN call per row (channel chunks)
        ((4,), 1, 1),           # degenerate sizes
    ],
)
def test_matches_tflite_formula(per_channel, lead, row_len, out_ch):
    rng = np.random.default_rng(row_len * 1000 + out_ch + per_channel)
    x, w, bias, mult, shift = _random_fc(rng, lead, row_len, out_ch, per_channel)
    p = fc_params(input_offset=int(rng.integers(-127, 129)), output_offset=int(rng.integers(-128, 128)))
    got = run_fc(x, w, bias, mult, shift, **p)
    assert got.shape == lead + (out_ch,)
    np.testing.assert_array_equal(got, fc_reference(x, w, bias, mult, shift, p))


def test_no_bias_and_filter_offset():
    rng = np.random.default_rng(7)
    x, w, _, mult, shift = _random_fc(rng, (3,), 19, 6, True, has_bias=False)
    for fo in (-127, -1, 0, 5, 128):
        p = fc_params(input_offset=-3, filter_offset=fo, output_offset=11)
        np.testing.assert_array_equal(run_fc(x, w, None, mult, shift, **p), fc_reference(x, w, None, mult, shift, p))


@pytest.mark.parametrize("act", [(-128, 127), (-20, 127), (-128, 13), (-5, 5), (3, 3)])
def test_activation_clamp(act):
    rng = np.random.default_rng(11)
    x, w, bias, mult, shift = _random_fc(rng, (4,), 24, 16, True, shift_range=(-9, -7))
    p = fc_params(input_offset=10, output_offset=-7, act_min=act[0], act_max=act[1])
    got = run_fc(x, w, bias, mult, shift, **p)
    want = fc_reference(x, w, bias, mult, shift, p)
    np.testing.assert_array_equal(got, want)
    assert got.min() >= act[0] and got.max() <= act[1]
    if act != (-128, 127):
        assert (got == act[0]).any() or (got == act[1]).any()  # the clamp is exercised


M31 = 2**31 - 1
# (acc, mult, shift, expected y): MBQM at chosen accumulators. RDBP ties go away
# from zero (+-1.5 -> +-2, -2.5 -> -3); SRDHM's nudge is 1 - 2^30 for a negative
# product, so its own ties round up (-0.5 -> 0, -1.5 -> -1); shifts from -31 to
# the left shift +14.
REQUANT_EDGES = [
    (3, M31, -1, 2), (-3, M31, -1, -2), (5, M31, -1, 3), (-5, M31, -1, -3),
    (2, M31, -2, 1), (-2, M31, -2, -1), (-6, M31, -2, -2), (-1, M31, -1, -1),
    (3 << 29, M31, -30, 1), (-(3 << 29), M31, -30, -1),
    (2**30, M31, -31, 1), (-(2**30), M31, -31, 0),
    (2**31 - 1000, M31, -31, 1), (-(2**31) + 1000, M31, -31, -1),
    (1, 2**30, 0, 1), (-1, 2**30, 0, 0), (3, 2**30, 0, 2), (-3, 2**30, 0, -1),
    (3, 2**16, 14, 2), (-3, 2**16, 14, -1), (5, 2**16, 14, 3), (-5, 2**16, 14, -2),
    (100, 2**30, 0, 50), (-100, M31, 0, -100),
]


def test_requantization_edges():
    # x = 0 with input_offset 0: the accumulator is exactly bias[o], one channel per case,
    # requantized per channel.
    acc, mult, shift, want = (np.array(c, np.int64) for c in zip(*REQUANT_EDGES))
    np.testing.assert_array_equal(mbqm(acc, mult, shift, wrap=False), want)  # the oracle agrees with the table
    out_ch = len(REQUANT_EDGES)
    x = np.zeros((2, 1), np.int8)
    w = np.ones((out_ch, 1), np.int8)
    got = run_fc(x, w, acc.astype(np.int32), mult.astype(np.int32), shift.astype(np.int32), **fc_params())
    np.testing.assert_array_equal(got, np.broadcast_to(want.astype(np.int8), (2, out_ch)))
    # through the output offset as well (y + 100 stays in range for every case)
    got = run_fc(x, w, acc.astype(np.int32), mult.astype(np.int32), shift.astype(np.int32),
                 **fc_params(output_offset=-27))
    np.testing.assert_array_equal(got[0], (want - 27).astype(np.int8))


def test_scratch_only_for_misaligned_rows():
    def scratch(lead, row_len):
        x = np.zeros(lead + (row_len,), np.int8)
        w = np.ones((3, row_len), np.int8)
        blob, _ = build_op("FULLY_CONNECTED", [Input(x), Const(w), None, Const(np.array([2**30], np.int32)),
                                               Const(np.array([-8], np.int32))],
                           [Out(lead + (3,))], **fc_params())
        return _native.Program(blob).scratch_bytes

    assert scratch((3,), 5) == 16      # rows 1, 2 start at offsets 5 and 10
    assert scratch((2,), 33) == 48
    assert scratch((3,), 32) == 0      # every row 16-byte aligned
    assert scratch((1,), 5) == 0       # a single row starts at the tensor's aligned base


# ---- PyTorch quantized reference (within 1 LSB) ------------------------------------


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_matches_pytorch_quantized_linear(per_channel, relu, exact_quantized_engine):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3 + 2 * per_channel + relu)
    batch, row_len, out_ch = 6, 45, 24
    xf = torch.randn(batch, row_len, generator=g) * 2.0
    wf = torch.randn(out_ch, row_len, generator=g) * 0.3
    bf = torch.randn(out_ch, generator=g) * 0.5
    s_in, zp_in_u8 = 0.035, 140
    s_out, zp_out_u8 = 0.11, 120
    xq = torch.quantize_per_tensor(xf, s_in, zp_in_u8, torch.quint8)
    if per_channel:
        s_w = (wf.abs().amax(dim=1) / 127).double()
        wq = torch.quantize_per_channel(wf, s_w, torch.zeros(out_ch, dtype=torch.long), 0, torch.qint8)
        s_w = wq.q_per_channel_scales().numpy().astype(np.float32)
    else:
        wq = torch.quantize_per_tensor(wf, float(wf.abs().max()) / 127, 0, torch.qint8)
        s_w = np.array([wq.q_scale()], np.float32)
    packed = torch.ops.quantized.linear_prepack(wq, bf)
    op = torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear
    ref = op(xq, packed, s_out, zp_out_u8).int_repr().numpy().astype(np.int32) - 128

    # esp-tflite-micro's recipe on float32 scales; int8 = quint8 - 128
    f_in, f_out = np.float32(s_in), np.float32(s_out)
    if per_channel:
        mq = [quantize_multiplier(float(f_in) * float(sw) / float(f_out)) for sw in s_w]
    else:
        mq = [quantize_multiplier(float(np.float32(f_in * s_w[0])) / float(f_out))]
    mult = np.array([m for m, _ in mq], np.int32)
    shift = np.array([e for _, e in mq], np.int32)
    bias_q = np.round(bf.numpy().astype(np.float64) / (float(f_in) * np.broadcast_to(s_w, (out_ch,)).astype(np.float64)))
    zp_in, zp_out = zp_in_u8 - 128, zp_out_u8 - 128
    amin, amax = activation_range("relu" if relu else None, f_out, zp_out)
    x = (xq.int_repr().numpy().astype(np.int32) - 128).astype(np.int8)
    w = wq.int_repr().numpy().astype(np.int8)
    got = run_fc(x, w, bias_q.astype(np.int32), mult, shift,
                 **fc_params(-zp_in, 0, zp_out, amin, amax)).astype(np.int32)
    diff = np.abs(got - ref)
    assert diff.max() <= 1, diff.max()
    assert (diff == 0).mean() > 0.9


# ---- rejection ------------------------------------------------------------------------


def _ok_inputs(row_len=8, out_ch=4, lead=(2,)):
    x = np.zeros(lead + (row_len,), np.int8)
    w = np.ones((out_ch, row_len), np.int8)
    return [Input(x), Const(w), Const(np.zeros(out_ch, np.int32)), Const(np.array([2**30], np.int32)),
            Const(np.array([-5], np.int32))]


def test_valid_baseline_loads():
    blob, _ = build_op("FULLY_CONNECTED", _ok_inputs(), [Out((2, 4))], **fc_params())
    _native.Program(blob)


def test_reject_row_len_over_uint16():
    row_len = 65536
    ins = [Input(np.zeros((1, row_len), np.int8)), Const(np.zeros((1, row_len), np.int8)), None,
           Const(np.array([2**30], np.int32)), Const(np.array([-5], np.int32))]
    msg = load_error(ins, (1, 1), **fc_params())
    assert "row_len" in msg and "65535" in msg


def test_reject_out_channels_over_uint16():
    ins = [Input(np.zeros((1, 1), np.int8)), Const(np.zeros((65536, 1), np.int8)), None,
           Const(np.array([2**30], np.int32)), Const(np.array([-5], np.int32))]
    assert "out_channels" in load_error(ins, (1, 65536), **fc_params())


@pytest.mark.parametrize("n", [2, 3, 5])
def test_reject_mult_length(n):
    ins = _ok_inputs()
    ins[3] = Const(np.full(n, 2**30, np.int32))
    ins[4] = Const(np.full(n, -5, np.int32))
    msg = load_error(ins, (2, 4), **fc_params())
    assert "mult has" in msg and "out_channels = 4" in msg


def test_reject_shift_length_differs_from_mult():
    ins = _ok_inputs()
    ins[3] = Const(np.full(4, 2**30, np.int32))
    assert "shift has 1 elements, expected 4" in load_error(ins, (2, 4), **fc_params())


@pytest.mark.parametrize("out_shape,field", [((2, 5), "output dims[1] = 5, expected 4"),
                                             ((1, 4), "output dims[0] = 1, expected 2"),
                                             ((2, 1, 4), "output has rank 3")])
def test_reject_output_shape(out_shape, field):
    assert field in load_error(_ok_inputs(), out_shape, **fc_params())


def test_reject_input_row_len_mismatch():
    ins = _ok_inputs()
    ins[0] = Input(np.zeros((2, 9), np.int8))
    assert "input last dim 9 != filter row_len 8" in load_error(ins, (2, 4), **fc_params())


def test_reject_non_constant_filter():
    ins = _ok_inputs()
    ins[1] = Input(np.ones((4, 8), np.int8))
    assert "filter must be a constant" in load_error(ins, (2, 4), **fc_params())


def test_reject_bias_length_and_dtype():
    ins = _ok_inputs()
    ins[2] = Const(np.zeros(3, np.int32))
    assert "bias has 3 elements, expected 4" in load_error(ins, (2, 4), **fc_params())
    ins[2] = Const(np.zeros(4, np.int8))
    assert "bias has dtype INT8" in load_error(ins, (2, 4), **fc_params())


@pytest.mark.parametrize("field,value", [("input_offset", 129), ("input_offset", -128),
                                         ("filter_offset", 129), ("filter_offset", -128),
                                         ("output_offset", 128), ("act_min", -129)])
def test_reject_param_range(field, value):
    params = fc_params()
    params[field] = value
    assert field in load_error(_ok_inputs(), (2, 4), **params)


def test_reject_act_min_above_act_max():
    assert "act_min 5 > act_max 4" in load_error(_ok_inputs(), (2, 4), **fc_params(act_min=5, act_max=4))


@pytest.mark.parametrize("mult,shift,field", [(-1, -5, "mult = -1"), (2**30, -32, "shift = -32"),
                                              (2**30, 31, "shift = 31")])
def test_reject_requant_params(mult, shift, field):
    ins = _ok_inputs()
    ins[3] = Const(np.array([mult], np.int32))
    ins[4] = Const(np.array([shift], np.int32))
    assert field in load_error(ins, (2, 4), **fc_params())


def test_reject_per_channel_entry_named():
    ins = _ok_inputs()
    ins[3] = Const(np.array([2**30, 2**30, -7, 2**30], np.int32))
    ins[4] = Const(np.full(4, -5, np.int32))
    assert "mult[2] = -7" in load_error(ins, (2, 4), **fc_params())


def test_reject_accumulator_that_can_overflow():
    # 40000 taps of |w| = 127 times |x + 128| <= 255 is 1.3e9: fits int32, but
    # not after a left shift by 1.
    row_len = 40000
    x = np.zeros((1, row_len), np.int8)
    w = np.full((2, row_len), 127, np.int8)

    def ins(shift):
        return [Input(x), Const(w), None, Const(np.array([2**30, 2**30], np.int32)),
                Const(np.array([0, shift], np.int32))]

    blob, _ = build_op("FULLY_CONNECTED", ins(0), [Out((1, 2))], **fc_params(input_offset=128))
    _native.Program(blob)  # at the limit but safe
    msg = load_error(ins(1), (1, 2), **fc_params(input_offset=128))
    assert "output channel 1" in msg and "int32" in msg
    # a bias that pushes the same channel past int32 is caught too
    bias = Const(np.array([0, 2**31 - 1000], np.int32))
    msg = load_error([Input(x), Const(w), bias, Const(np.array([2**30], np.int32)), Const(np.array([0], np.int32))],
                     (1, 2), **fc_params(input_offset=128))
    assert "output channel 1" in msg
