"""Bit-exactness of the host ESP-NN kernels against ESP-NN 1.2.3 golden vectors.

The vectors (tests/data/espnn-vectors/*.npz, 817 cases) hold outputs of the real
ESP-NN 1.2.3 ANSI kernels.  Every case is replayed through the kernels the
extension was built with (`executorch_espnn._native.kernels`: the project's
stand-in, or the real ESP-NN sources when the build was given them) and must
match exactly.  One test per vector file; a failure lists every failing case.

The vectors ship with the repository (tests/data/espnn-vectors, README there);
ESPNN_VECTORS_DIR points the tests at another set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import pytest

VECTOR_FILES = {
    "add_s8.npz": 60,
    "avg_pool_s8.npz": 60,
    "conv_s8.npz": 120,
    "depthwise_conv_s8.npz": 100,
    "fully_connected_per_ch_s8.npz": 60,
    "fully_connected_s8.npz": 60,
    "hard_swish_s8.npz": 40,
    "logistic_s8.npz": 40,
    "max_pool_s8.npz": 60,
    "mean_s8.npz": 40,
    "mul_broadcast_channel_s8.npz": 60,
    "mul_s8.npz": 60,
    "relu6_s8.npz": 7,
    "softmax_s8.npz": 50,
}


def _vectors_dir() -> Path:
    override = os.environ.get("ESPNN_VECTORS_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / "data" / "espnn-vectors"


@pytest.fixture(scope="module")
def kernels():
    from executorch_espnn import _native  # the built extension; no fallback

    return _native.kernels


class Case:
    """Arrays of case i of an .npz file, plus its named int32 params."""

    def __init__(self, data, fields, index: int):
        self._data = data
        self._prefix = f"c{index}_"
        self.index = index
        self.p: Dict[str, int] = dict(zip(fields, (int(v) for v in data[self._prefix + "params"])))
        self.note = str(data[self._prefix + "note"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[self._prefix + name]

    def bias(self):
        return self["bias"] if self.p["has_bias"] else None


# Each runner calls the kernel(s) for one case and returns {array name: result};
# every returned array is compared with the stored array of the same name.
Runner = Callable[[object, Case], Dict[str, np.ndarray]]


def _conv(k, c: Case):
    p = c.p
    out = k.conv_s8(
        c["input"], c["filter"], c.bias(), c["mult"], c["shift"],
        out_h=p["out_h"], out_w=p["out_w"], out_ch=p["out_ch"], filter_ch=p["filter_ch"],
        stride_h=p["stride_h"], stride_w=p["stride_w"], pad_h=p["pad_h"], pad_w=p["pad_w"],
        in_offset=p["in_offset"], out_offset=p["out_offset"], act_min=p["act_min"], act_max=p["act_max"],
    )
    return {"output": out}


def _depthwise(k, c: Case):
    p = c.p
    out = k.depthwise_conv_s8(
        c["input"], c["filter"], c.bias(), c["mult"], c["shift"],
        out_h=p["out_h"], out_w=p["out_w"], ch_mult=p["ch_mult"],
        stride_h=p["stride_h"], stride_w=p["stride_w"], pad_h=p["pad_h"], pad_w=p["pad_w"],
        in_offset=p["in_offset"], out_offset=p["out_offset"], act_min=p["act_min"], act_max=p["act_max"],
    )
    return {"output": out}


def _fc(k, c: Case):
    p = c.p
    out = k.fully_connected_s8(
        c["input"], in_offset=p["in_offset"], filter=c["filter"], filter_offset=p["filter_offset"],
        bias=c.bias(), out_offset=p["out_offset"], shift=int(c["shift"][0]), mult=int(c["mult"][0]),
        act_min=p["act_min"], act_max=p["act_max"],
    )
    return {"output": out}


def _fc_per_ch(k, c: Case):
    p = c.p
    out = k.fully_connected_per_ch_s8(
        c["input"], in_offset=p["in_offset"], filter=c["filter"], filter_offset=p["filter_offset"],
        bias=c.bias(), out_offset=p["out_offset"], shift=c["shift"], mult=c["mult"],
        act_min=p["act_min"], act_max=p["act_max"],
    )
    return {"output": out}


def _add(k, c: Case):
    p = c.p
    out = k.add_s8(
        c["input1"], c["input2"], in1_offset=p["in1_offset"], in2_offset=p["in2_offset"],
        in1_mult=p["in1_mult"], in2_mult=p["in2_mult"], in1_shift=p["in1_shift"], in2_shift=p["in2_shift"],
        left_shift=p["left_shift"], out_offset=p["out_offset"], out_mult=p["out_mult"],
        out_shift=p["out_shift"], act_min=p["act_min"], act_max=p["act_max"],
    )
    return {"output": out}


def _mul(k, c: Case):
    p = c.p
    out = k.mul_s8(
        c["input1"], c["input2"], in1_offset=p["in1_offset"], in2_offset=p["in2_offset"],
        out_offset=p["out_offset"], out_mult=p["out_mult"], out_shift=p["out_shift"],
        act_min=p["act_min"], act_max=p["act_max"],
    )
    return {"output": out}


def _mul_broadcast(k, c: Case):
    p = c.p
    out = k.mul_broadcast_channel_s8(
        c["input1"], c["input2"], in1_offset=p["in1_offset"], in2_offset=p["in2_offset"],
        out_offset=p["out_offset"], out_mult=p["out_mult"], out_shift=p["out_shift"],
        act_min=p["act_min"], act_max=p["act_max"],
    )
    return {"output": out}


def _pool(name: str) -> Runner:
    def run(k, c: Case):
        p = c.p
        out = getattr(k, name)(
            c["input"], out_h=p["out_h"], out_w=p["out_w"], stride_h=p["stride_h"], stride_w=p["stride_w"],
            k_h=p["k_h"], k_w=p["k_w"], pad_h=p["pad_h"], pad_w=p["pad_w"],
            act_min=p["act_min"], act_max=p["act_max"],
        )
        return {"output": out}

    return run


def _softmax(k, c: Case):
    p = c.p
    return {"output": k.softmax_s8(c["input"], mult=p["mult"], shift=p["shift"], diff_min=p["diff_min"])}


def _mean(k, c: Case):
    p = c.p
    out = k.mean_s8(c["input"], input_zp=p["input_zp"], output_zp=p["output_zp"], mult=p["mult"], shift=p["shift"])
    return {"output": out}


def _hard_swish(k, c: Case):
    p = c.p
    out = k.hard_swish_s8(
        c["input"], input_zp=p["input_zp"], output_mult_fxp=p["output_mult_fxp"],
        reluish_mult_fxp=p["reluish_mult_fxp"], reluish_mult_exp=p["reluish_mult_exp"],
        output_mult_exp=p["output_mult_exp"], output_zp=p["output_zp"],
    )
    return {"output": out}


def _logistic(k, c: Case):
    lut = k.logistic_prepare(input_zp=c.p["input_zp"], input_scale=float(c["fscale"][0]))
    # the stored LUT drives the kernel, so a LUT mismatch is not reported twice
    return {"lut": lut, "output": k.logistic_s8(c["input"], c["lut"])}


def _relu6(k, c: Case):
    return {"output": k.relu6_s8(c["input"])}


RUNNERS: Dict[str, Runner] = {
    "add_s8.npz": _add,
    "avg_pool_s8.npz": _pool("avg_pool_s8"),
    "conv_s8.npz": _conv,
    "depthwise_conv_s8.npz": _depthwise,
    "fully_connected_per_ch_s8.npz": _fc_per_ch,
    "fully_connected_s8.npz": _fc,
    "hard_swish_s8.npz": _hard_swish,
    "logistic_s8.npz": _logistic,
    "max_pool_s8.npz": _pool("max_pool_s8"),
    "mean_s8.npz": _mean,
    "mul_broadcast_channel_s8.npz": _mul_broadcast,
    "mul_s8.npz": _mul,
    "relu6_s8.npz": _relu6,
    "softmax_s8.npz": _softmax,
}


def _describe_mismatch(name: str, got: np.ndarray, want: np.ndarray) -> str:
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: got {got.dtype}{got.shape}, want {want.dtype}{want.shape}"
    bad = np.argwhere(got != want)
    first = tuple(int(i) for i in bad[0])
    return (
        f"{name}: {len(bad)}/{want.size} elements differ, first at {first}: "
        f"got {int(got[first])}, want {int(want[first])}"
    )


@pytest.mark.parametrize("filename", sorted(VECTOR_FILES))
def test_golden_vectors(kernels, filename):
    vectors = _vectors_dir()
    if not vectors.is_dir():
        pytest.fail(f"ESP-NN golden vectors not found at {vectors} (they ship in tests/data/espnn-vectors; "
                    "check ESPNN_VECTORS_DIR)")
    path = vectors / filename
    assert path.is_file(), f"{path} is missing from the vectors directory"

    run = RUNNERS[filename]
    with np.load(path) as data:
        assert str(data["espnn_version"]) == "1.2.3"
        num_cases = int(data["num_cases"])
        assert num_cases == VECTOR_FILES[filename], "unexpected number of cases"
        fields = [str(f) for f in data["params_fields"]]

        failures = []
        for i in range(num_cases):
            case = Case(data, fields, i)
            try:
                results = run(kernels, case)
            except Exception as exc:  # report and keep going: every failing case is listed
                failures.append(f"case {i} [{case.note}]: raised {type(exc).__name__}: {exc}")
                continue
            for name, got in results.items():
                want = case[name]
                got = np.asarray(got)
                if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
                    failures.append(f"case {i} [{case.note}]: {_describe_mismatch(name, got, want)}")

    impl = f"{getattr(kernels, 'implementation', '?')} {getattr(kernels, 'espnn_version', '?')}"
    assert not failures, (
        f"{filename}: {len(failures)} of {num_cases} checks failed against ESP-NN 1.2.3 ({impl}):\n"
        + "\n".join(failures)
    )
