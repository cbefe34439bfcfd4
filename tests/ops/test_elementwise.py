"""ADD and MUL (int8, numpy broadcasting) through the native interpreter.

Oracles, all independent of the C++ under test:
* the ESP-NN 1.2.3 golden vectors add_s8, mul_s8 and mul_broadcast_channel_s8,
  bit-exact;
* TFLite's integer Add / Mul written below in numpy int64 on np.broadcast_to'd
  operands, bit-exact:
    Add: a = RDBP(SRDHM((x1 + o1) * 2^ls, m1), -s1), b likewise,
         y = clamp(RDBP(SRDHM(a + b, mo), -so) + out_offset, act_min, act_max)
    Mul: y = clamp(MBQM((x1 + o1)(x2 + o2), m, s) + out_offset, act_min, act_max)
  (SRDHM, RDBP, MBQM and QuantizeMultiplier from tests/support/tflite_reference.py);
* PyTorch's quantized add / mul (+ _relu) within 1 LSB, with parameters derived
  here from float scales by TFLite's QuantizeMultiplier and its add/mul recipes
  (reference/espnn-kernels.md section 8).
Plus rejection tests whose messages must name the offending field.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from executorch_espnn import _native
from espnn_dev.graph_util import Const, Input, Out, build_op, rejection_message, run_op
from support.tflite_reference import activation_range, in_int32, mbqm, quantize_multiplier, rdbp, srdhm


# ---- oracle: TFLite integer Add / Mul in numpy int64 ---------------------------------


def add_reference(x1, x2, p):
    x1, x2 = np.broadcast_arrays(x1.astype(np.int64), x2.astype(np.int64))
    a = in_int32((x1 + p["input1_offset"]) << p["left_shift"])
    b = in_int32((x2 + p["input2_offset"]) << p["left_shift"])
    a = rdbp(srdhm(a, p["input1_mult"]), -p["input1_shift"])
    b = rdbp(srdhm(b, p["input2_mult"]), -p["input2_shift"])
    y = rdbp(srdhm(in_int32(a + b), p["output_mult"]), -p["output_shift"]) + p["output_offset"]
    return np.clip(y, p["act_min"], p["act_max"]).astype(np.int8)


def mul_reference(x1, x2, p):
    x1, x2 = np.broadcast_arrays(x1.astype(np.int64), x2.astype(np.int64))
    prod = (x1 + p["input1_offset"]) * (x2 + p["input2_offset"])
    y = mbqm(prod, p["output_mult"], p["output_shift"], wrap=False) + p["output_offset"]
    return np.clip(y, p["act_min"], p["act_max"]).astype(np.int8)


REFERENCE = {"ADD": add_reference, "MUL": mul_reference}


# ---- TFLite's add/mul parameter recipes --------------------------------------------------


def add_params_from_scales(s1, zp1, s2, zp2, s_out, zp_out, relu=False):
    s1, s2, s_out = (float(np.float32(s)) for s in (s1, s2, s_out))
    left_shift = 20
    twice = 2 * max(s1, s2)
    m1, e1 = quantize_multiplier(s1 / twice)
    m2, e2 = quantize_multiplier(s2 / twice)
    mo, eo = quantize_multiplier(twice / ((1 << left_shift) * s_out))
    amin, amax = activation_range("relu" if relu else None, s_out, zp_out)
    return dict(input1_offset=-zp1, input2_offset=-zp2, input1_mult=m1, input1_shift=e1, input2_mult=m2,
                input2_shift=e2, left_shift=left_shift, output_offset=zp_out, output_mult=mo, output_shift=eo,
                act_min=amin, act_max=amax)


def mul_params_from_scales(s1, zp1, s2, zp2, s_out, zp_out, relu=False):
    s1, s2, s_out = (float(np.float32(s)) for s in (s1, s2, s_out))
    m, e = quantize_multiplier(s1 * s2 / s_out)
    amin, amax = activation_range("relu" if relu else None, s_out, zp_out)
    return dict(input1_offset=-zp1, input2_offset=-zp2, output_offset=zp_out, output_mult=m, output_shift=e,
                act_min=amin, act_max=amax)


# ---- helpers -------------------------------------------------------------------------


def out_shape(a, b):
    return np.broadcast_shapes(np.shape(a), np.shape(b))


def run_binary(op, x1, x2, **params):
    return run_op(op, [x1, x2], Out(out_shape(_arr(x1), _arr(x2))), **params)


def _arr(x):
    return x.array if isinstance(x, (Input, Const)) else x


def load_error(op, a_shape, b_shape, o_shape, params, a_dtype=np.int8) -> str:
    blob, _ = build_op(op, [np.zeros(a_shape, a_dtype), np.zeros(b_shape, np.int8)], [Out(o_shape)], **params)
    return rejection_message(blob)


def random_add_params(rng, relu=False):
    s1, s2, s_out = rng.uniform(0.005, 0.2, size=3)
    zp1, zp2, zp_out = (int(v) for v in rng.integers(-128, 128, size=3))
    return add_params_from_scales(s1, zp1, s2, zp2, s_out * 2, zp_out, relu)


def random_mul_params(rng, relu=False):
    s1, s2 = rng.uniform(0.005, 0.2, size=2)
    s_out = s1 * s2 * rng.uniform(20, 200)
    zp1, zp2, zp_out = (int(v) for v in rng.integers(-128, 128, size=3))
    return mul_params_from_scales(s1, zp1, s2, zp2, s_out, zp_out, relu)


RANDOM_PARAMS = {"ADD": random_add_params, "MUL": random_mul_params}

ADD_FIELDS = {  # XTS3 ADD field -> add_s8.npz field
    "input1_offset": "in1_offset", "input2_offset": "in2_offset", "input1_mult": "in1_mult",
    "input1_shift": "in1_shift", "input2_mult": "in2_mult", "input2_shift": "in2_shift",
    "left_shift": "left_shift", "output_offset": "out_offset", "output_mult": "out_mult",
    "output_shift": "out_shift", "act_min": "act_min", "act_max": "act_max",
}
MUL_FIELDS = {
    "input1_offset": "in1_offset", "input2_offset": "in2_offset", "output_offset": "out_offset",
    "output_mult": "out_mult", "output_shift": "out_shift", "act_min": "act_min", "act_max": "act_max",
}


def _cases(vectors_dir, name):
    z = np.load(vectors_dir / name)
    fields = z["params_fields"].tolist()
    for i in range(int(z["num_cases"])):
        yield i, z, dict(zip(fields, z[f"c{i}_params"].tolist()))


# ---- golden vectors (ESP-NN 1.2.3 ANSI), bit-exact ---------------------------------


@pytest.mark.parametrize("op,name,fields", [("ADD", "add_s8.npz", ADD_FIELDS), ("MUL", "mul_s8.npz", MUL_FIELDS)])
def test_golden_vectors_same_shape(vectors_dir, op, name, fields):
    failures, n = [], 0
    for i, z, p in _cases(vectors_dir, name):
        params = {k: p[v] for k, v in fields.items()}
        x1, x2, want = z[f"c{i}_input1"], z[f"c{i}_input2"], z[f"c{i}_output"]
        got = run_binary(op, x1, x2, **params)
        # the same elements as a rank-3 tensor (and a constant operand) give the same bytes
        if x1.size % 4 == 0:
            shape = (2, x1.size // 4, 2)
            got3 = run_binary(op, x1.reshape(shape), Const(x2.reshape(shape)), **params)
            if not np.array_equal(got3.reshape(-1), want):
                failures.append(f"case {i} as rank 3")
        if not np.array_equal(got, want):
            failures.append(f"case {i} ({z[f'c{i}_note']}): {int((got != want).sum())} differ")
        n += 1
    assert n == 60
    assert not failures, "\n".join(failures)


def test_golden_vectors_mul_broadcast_channel(vectors_dir):
    failures = []
    for i, z, p in _cases(vectors_dir, "mul_broadcast_channel_s8.npz"):
        params = {k: p[v] for k, v in MUL_FIELDS.items()}
        ts, c = p["total_spatial"], p["channels"]
        x1 = z[f"c{i}_input1"].reshape(ts, c)
        x2 = z[f"c{i}_input2"].reshape(c)
        want = z[f"c{i}_output"].reshape(ts, c)
        swapped = dict(params, input1_offset=params["input2_offset"], input2_offset=params["input1_offset"])
        variants = {
            "[S,C]*[C]": run_binary("MUL", x1, x2, **params),
            "[C]*[S,C]": run_binary("MUL", x2, x1, **swapped),
            "[1,S,1,C]*[1,1,C]": run_binary("MUL", x1.reshape(1, ts, 1, c), x2.reshape(1, 1, c), **params)
            .reshape(ts, c),
        }
        for what, got in variants.items():
            if not np.array_equal(got, want):
                failures.append(f"case {i} {what} ({z[f'c{i}_note']}): {int((got != want).sum())} differ")
    assert not failures, "\n".join(failures)


# ---- exact TFLite formulas on broadcast shapes ----------------------------------------

BROADCAST_SHAPES = [
    ((2, 3, 4), (4,)),                 # trailing alignment, contiguous inner runs
    ((4,), (2, 3, 4)),
    ((2, 1, 4), (1, 3, 1)),            # both operands broadcast; innermost dim broadcast
    ((1, 4, 4, 8), (1, 1, 1, 8)),      # squeeze-excite (MUL: broadcast-channel kernel)
    ((1, 1, 1, 8), (1, 4, 4, 8)),
    ((3, 1, 32), (1, 5, 32)),          # 16-byte aligned runs
    ((2, 3, 1, 4, 16), (3, 2, 1, 16)),  # rank 5, aligned runs of 16
    ((2, 1, 3, 1, 5), (1, 4, 1, 2, 1)),  # rank 5, everything broadcast
    ((5, 7), (1,)),                    # scalar
    ((1,), (5, 7)),
    ((6, 1), (6, 9)),                  # one operand broadcast along the last dim
    ((3, 5, 7), (3, 5, 7)),            # no broadcast
    ((1, 1, 1), (4, 1, 1)),            # runs of length 1
]


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_broadcast_matches_tflite_formula(op, shapes):
    rng = np.random.default_rng(zlib.crc32(repr((op, shapes)).encode()))
    x1 = rng.integers(-128, 128, size=shapes[0], dtype=np.int8)
    x2 = rng.integers(-128, 128, size=shapes[1], dtype=np.int8)
    for _ in range(3):
        p = RANDOM_PARAMS[op](rng)
        got = run_binary(op, x1, x2, **p)
        assert got.shape == out_shape(x1, x2)
        np.testing.assert_array_equal(got, REFERENCE[op](x1, x2, p))


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_constant_operand(op):
    rng = np.random.default_rng(5)
    x1 = rng.integers(-128, 128, size=(2, 3, 8), dtype=np.int8)
    x2 = rng.integers(-128, 128, size=(3, 1), dtype=np.int8)
    p = RANDOM_PARAMS[op](rng)
    got = run_op(op, [x1, Const(x2)], Out((2, 3, 8)), **p)
    np.testing.assert_array_equal(got, REFERENCE[op](x1, x2, p))
    got = run_op(op, [Const(x2), x1], Out((2, 3, 8)), **dict(
        p, input1_offset=p["input2_offset"], input2_offset=p["input1_offset"],
        **({"input1_mult": p["input2_mult"], "input2_mult": p["input1_mult"],
            "input1_shift": p["input2_shift"], "input2_shift": p["input1_shift"]} if op == "ADD" else {})))
    np.testing.assert_array_equal(got, REFERENCE[op](x1, x2, p))


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("act", [(-128, 127), (0, 127), (-128, 10), (-7, 7), (-100, -100)])
@pytest.mark.parametrize("shapes", [((3, 40), (3, 40)), ((3, 40), (40,)), ((3, 1), (1, 40)), ((1, 5, 5, 24), (24,))])
def test_activation_clamp(op, act, shapes):
    rng = np.random.default_rng(17)
    x1 = rng.integers(-128, 128, size=shapes[0], dtype=np.int8)
    x2 = rng.integers(-128, 128, size=shapes[1], dtype=np.int8)
    p = dict(RANDOM_PARAMS[op](rng), act_min=act[0], act_max=act[1])
    got = run_binary(op, x1, x2, **p)
    np.testing.assert_array_equal(got, REFERENCE[op](x1, x2, p))
    assert got.min() >= act[0] and got.max() <= act[1]


@pytest.mark.parametrize("shapes", [((64,), (64,)), ((4, 5), (5,)), ((4, 1), (1, 5)), ((2, 2, 8), (8,))])
@pytest.mark.parametrize("shift", [-31, -30, -20, -12, -8, -1, 0, 1, 7, 13, 14])
def test_mul_shift_range(shapes, shift):
    # every operand pair appears, incl. the extreme products (-128 + 128)(..) and 255^2
    rng = np.random.default_rng(shift + 40)
    x1 = rng.integers(-128, 128, size=shapes[0], dtype=np.int8)
    x2 = rng.integers(-128, 128, size=shapes[1], dtype=np.int8)
    x1.reshape(-1)[:2] = [127, -128]
    x2.reshape(-1)[:1] = [127]
    for mult, o1, o2 in [(2**31 - 1, 128, 128), (2**30, -127, 3), (1 << 16, 0, 0), (1_234_567_891, 128, -127)]:
        # left shifts: a small multiplier keeps outputs off the rails
        m = mult if shift <= 0 else max(1, mult >> (shift + 16))
        p = dict(input1_offset=o1, input2_offset=o2, output_offset=-3, output_mult=m, output_shift=shift,
                 act_min=-128, act_max=127)
        np.testing.assert_array_equal(run_binary("MUL", x1, x2, **p), mul_reference(x1, x2, p))


def test_mul_negative_ties():
    # mult = 2^30 (one half): with shift -1 the products land on quarter steps, so
    # many values are exact ties; RDBP rounds them away from zero, SRDHM's
    # negative nudge toward +inf. Known values: (x1+o1)(x2+o2) = -3 -> SRDHM -1 ->
    # RDBP(-1, 1) = -1; = -6 -> -3 -> -2; = 6 -> 3 -> 2.
    x1 = np.array([-3, -6, 6, -5, -10, 10, -7, -1], np.int8)
    x2 = np.ones(8, np.int8)
    p = dict(input1_offset=0, input2_offset=0, output_offset=0, output_mult=2**30, output_shift=-1,
             act_min=-128, act_max=127)
    want = mul_reference(x1, x2, p)
    np.testing.assert_array_equal(want[:3], [-1, -2, 2])
    np.testing.assert_array_equal(run_binary("MUL", x1, x2, **p), want)
    # and through the per-element broadcast loop and the broadcast-channel kernel
    np.testing.assert_array_equal(run_binary("MUL", x1.reshape(8, 1), np.ones((1, 3), np.int8), **p),
                                  np.broadcast_to(want.reshape(8, 1), (8, 3)))
    np.testing.assert_array_equal(run_binary("MUL", x1.reshape(1, 8), np.ones((3, 1), np.int8), **p),
                                  np.broadcast_to(want, (3, 8)))
    np.testing.assert_array_equal(run_binary("MUL", np.broadcast_to(x1, (3, 8)).copy(), x2, **p),
                                  np.broadcast_to(want, (3, 8)))


@pytest.mark.parametrize("left_shift", [0, 7, 20])
@pytest.mark.parametrize("shifts", [(0, 0, 0), (-1, -2, -31), (-31, 0, -13), (-5, -31, -1)])
@pytest.mark.parametrize("shapes", [((100,), (100,)), ((4, 25), (25,)), ((4, 1, 3), (1, 5, 1))])
def test_add_requantization_edges(left_shift, shifts, shapes):
    rng = np.random.default_rng(left_shift * 100 + shifts[2] + 50)
    x1 = rng.integers(-128, 128, size=shapes[0], dtype=np.int8)
    x2 = rng.integers(-128, 128, size=shapes[1], dtype=np.int8)
    x1.reshape(-1)[:2] = [127, -128]
    x2.reshape(-1)[:2] = [-128, 127]
    for mults, offs in [((2**31 - 1, 2**31 - 1, 2**31 - 1), (128, 128, 127)),
                        ((2**30, 2**30, 2**30), (-127, -127, -128)),
                        ((1_500_000_000, 1_100_000_000, 1_900_000_000), (0, 17, -5))]:
        p = dict(input1_offset=offs[0], input2_offset=offs[1], output_offset=offs[2],
                 input1_mult=mults[0], input2_mult=mults[1], output_mult=mults[2],
                 input1_shift=shifts[0], input2_shift=shifts[1], output_shift=shifts[2],
                 left_shift=left_shift, act_min=-128, act_max=127)
        np.testing.assert_array_equal(run_binary("ADD", x1, x2, **p), add_reference(x1, x2, p))


def test_add_negative_ties_on_output_rescale():
    # input mults 2^31-1 with shifts 0 pass (x + o) << 0 almost unchanged (SRDHM(v, 2^31-1)
    # = v for small v); the output stage halves (mult 2^30, shift 0 -> SRDHM ties) then
    # divides by 2 (shift -1 -> RDBP ties).
    x1 = np.array([-3, -1, 1, 3, -5, 5, -2, 2], np.int8)
    x2 = np.zeros(8, np.int8)
    p = dict(input1_offset=0, input2_offset=0, input1_mult=2**31 - 1, input2_mult=2**31 - 1,
             input1_shift=0, input2_shift=0, left_shift=0, output_offset=0, output_mult=2**30,
             output_shift=-1, act_min=-128, act_max=127)
    want = add_reference(x1, x2, p)
    # -3 -> SRDHM -1 -> RDBP(-1, 1) = -1 ; 3 -> 2 -> 1 ; -5 -> -2 -> -1 ; 5 -> 3 -> 2
    np.testing.assert_array_equal(want[[0, 3, 4, 5]], [-1, 1, -1, 2])
    np.testing.assert_array_equal(run_binary("ADD", x1, x2, **p), want)
    np.testing.assert_array_equal(run_binary("ADD", x1.reshape(8, 1), np.zeros((1, 3), np.int8), **p),
                                  np.broadcast_to(want.reshape(8, 1), (8, 3)))


# ---- PyTorch quantized reference (within 1 LSB) ------------------------------------


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shapes", [((4, 6, 8), (4, 6, 8)), ((2, 3, 16), (16,)), ((2, 1, 5), (1, 3, 1)),
                                    ((1, 3, 3, 12), (1, 1, 1, 12))])
def test_matches_pytorch_quantized(op, relu, shapes, exact_quantized_engine):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(len(shapes[0]) * 10 + relu + (op == "MUL") * 100)
    f1 = torch.randn(shapes[0], generator=g) * 1.5
    f2 = torch.randn(shapes[1], generator=g) * 0.8
    s1, zp1 = 0.021, 131
    s2, zp2 = 0.013, 100
    if op == "ADD":
        s_out, zp_out = 0.04, 126
    else:
        s_out, zp_out = 0.011, 128
    q1 = torch.quantize_per_tensor(f1, s1, zp1, torch.quint8)
    q2 = torch.quantize_per_tensor(f2, s2, zp2, torch.quint8)
    # the reference on already-broadcast operands (broadcasting only replicates data)
    oshape = np.broadcast_shapes(shapes[0], shapes[1])
    b1 = torch.quantize_per_tensor(q1.dequantize().expand(oshape).contiguous(), s1, zp1, torch.quint8)
    b2 = torch.quantize_per_tensor(q2.dequantize().expand(oshape).contiguous(), s2, zp2, torch.quint8)
    fn = {("ADD", False): torch.ops.quantized.add, ("ADD", True): torch.ops.quantized.add_relu,
          ("MUL", False): torch.ops.quantized.mul, ("MUL", True): torch.ops.quantized.mul_relu}[(op, relu)]
    ref = fn(b1, b2, s_out, zp_out).int_repr().numpy().astype(np.int32) - 128

    # quint8 -> int8: values and zero points minus 128, scales unchanged
    x1 = (q1.int_repr().numpy().astype(np.int32) - 128).astype(np.int8)
    x2 = (q2.int_repr().numpy().astype(np.int32) - 128).astype(np.int8)
    recipe = add_params_from_scales if op == "ADD" else mul_params_from_scales
    p = recipe(s1, zp1 - 128, s2, zp2 - 128, s_out, zp_out - 128, relu)
    got = run_binary(op, x1, x2, **p).astype(np.int32)
    diff = np.abs(got - ref)
    assert diff.max() <= 1, diff.max()
    assert (diff == 0).mean() > 0.9


# ---- rejection ------------------------------------------------------------------------

ADD_OK = dict(input1_offset=0, input2_offset=0, input1_mult=2**30, input1_shift=0, input2_mult=2**30,
              input2_shift=0, left_shift=20, output_offset=0, output_mult=2**30, output_shift=-20,
              act_min=-128, act_max=127)
MUL_OK = dict(input1_offset=0, input2_offset=0, output_offset=0, output_mult=2**30, output_shift=-7,
              act_min=-128, act_max=127)
OK = {"ADD": ADD_OK, "MUL": MUL_OK}


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_valid_baseline_loads(op):
    blob, _ = build_op(op, [np.zeros((2, 3, 4), np.int8), np.zeros((3, 1), np.int8)], [Out((2, 3, 4))], **OK[op])
    _native.Program(blob)


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("a,b", [((2, 3), (4,)), ((2, 3, 4), (3, 3)), ((5, 1, 2), (4, 3))])
def test_reject_not_broadcastable(op, a, b):
    msg = load_error(op, a, b, (2, 3), OK[op])
    fmt = lambda s: "[" + ",".join(map(str, s)) + "]"  # noqa: E731
    assert f"input1 dims {fmt(a)} and input2 dims {fmt(b)} are not broadcastable" in msg


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("a,b,o", [((2, 3, 4), (4,), (2, 3, 5)), ((2, 3, 4), (4,), (1, 2, 3, 4)),
                                   ((2, 1), (1, 3), (2, 1)), ((4,), (4,), (1, 4))])
def test_reject_wrong_output_shape(op, a, b, o):
    msg = load_error(op, a, b, o, OK[op])
    assert "output dims" in msg and "expected" in msg


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_reject_dtype(op):
    assert "input1 has dtype INT32" in load_error(op, (4,), (4,), (4,), OK[op], a_dtype=np.int32)
    blob, _ = build_op(op, [np.zeros(4, np.int8), np.zeros(4, np.int8)], [Out((4,), "INT32")], **OK[op])
    with pytest.raises(ValueError, match="output has dtype INT32"):
        _native.Program(blob)


@pytest.mark.parametrize("field,value", [
    ("input1_offset", 129), ("input2_offset", -128), ("output_offset", 128), ("left_shift", 21),
    ("left_shift", -1), ("input1_shift", 1), ("input2_shift", -32), ("output_shift", 1),
    ("input1_mult", -1), ("output_mult", -5), ("act_max", 128),
])
def test_reject_add_params(field, value):
    assert field in load_error("ADD", (4,), (4,), (4,), dict(ADD_OK, **{field: value}))


@pytest.mark.parametrize("field,value", [
    ("input1_offset", -128), ("input2_offset", 129), ("output_offset", -129), ("output_shift", 15),
    ("output_shift", -32), ("output_mult", -1), ("act_min", -129),
])
def test_reject_mul_params(field, value):
    assert field in load_error("MUL", (4,), (4,), (4,), dict(MUL_OK, **{field: value}))


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_reject_act_min_above_act_max(op):
    assert "act_min 3 > act_max 2" in load_error(op, (4,), (4,), (4,), dict(OK[op], act_min=3, act_max=2))


def test_limits_accepted():
    # the documented extremes load and run
    blob, _ = build_op("MUL", [np.zeros(4, np.int8), np.zeros(4, np.int8)], [Out((4,))],
                       **dict(MUL_OK, input1_offset=128, input2_offset=-127, output_shift=14))
    _native.Program(blob)
    blob, _ = build_op("ADD", [np.zeros(4, np.int8), np.zeros(4, np.int8)], [Out((4,))],
                       **dict(ADD_OK, input1_offset=128, input2_offset=-127, left_shift=20, input1_shift=-31))
    _native.Program(blob)
