"""The kernels binding validates its arguments instead of letting ESP-NN misbehave."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def kernels():
    from executorch_espnn import _native  # the built extension; no fallback

    return _native.kernels


def test_reports_implementation(kernels):
    assert kernels.implementation in ("stand-in", "esp-nn")
    if kernels.implementation == "stand-in":
        assert kernels.espnn_version == "1.2.3"
    assert kernels.logistic_scratch_size() == 256


def test_runs_the_esp_nn_the_tests_are_given(kernels):
    """The two reports of the kernels agree, and with $ESPNN_DIR set for the
    tests (docs/firmware.md, "Running the suite against the real ESP-NN")
    the installed extension was built from that very tree: a suite run with
    ESPNN_DIR over a stand-in build (installed without it) would otherwise
    pass while saying nothing about ESP-NN."""
    from executorch_espnn import _native

    source = _native.KERNEL_SOURCE
    if kernels.implementation == "stand-in":
        assert source.startswith("stand-in"), source
    else:
        assert source.startswith(f"esp-nn {kernels.espnn_version} (ANSI C, from "), source
    espnn = os.environ.get("ESPNN_DIR")
    if espnn:
        assert kernels.implementation == "esp-nn", (
            f"ESPNN_DIR={espnn} is set but the installed extension runs {source}; "
            f"reinstall with: ESPNN_DIR={espnn} pip install .")
        built_from = re.fullmatch(r"esp-nn \S+ \(ANSI C, from (.+)\)", source).group(1)
        assert Path(built_from).resolve() == Path(espnn).resolve(), source
        manifest = (Path(espnn) / "idf_component.yml").read_text()
        assert re.search(r'^version:\s*"?([^"\s]+)', manifest, re.M).group(1) == kernels.espnn_version


def test_rejects_bad_arguments(kernels):
    x = np.zeros(4, np.int8)
    with pytest.raises(ValueError):
        kernels.mul_s8(x, x.astype(np.int16), 0, 0, 0, 1 << 30, 0, -128, 127)  # dtype
    with pytest.raises(ValueError):
        kernels.mul_s8(x, x[:3], 0, 0, 0, 1 << 30, 0, -128, 127)  # shape
    with pytest.raises(ValueError):
        kernels.mul_s8(x, x, 0, 0, 0, 1 << 31, 0, -128, 127)  # mult beyond int32
    with pytest.raises(ValueError):
        kernels.mul_s8(x, x, 0, 0, 0, 1 << 30, 32, -128, 127)  # undefined shift
    with pytest.raises(ValueError):
        kernels.add_s8(x, x, 0, 0, 1 << 30, 1 << 30, 1, 0, 20, 0, 1 << 30, 0, -128, 127)  # add shifts are <= 0
    img = np.zeros((3, 3, 2), np.int8)
    with pytest.raises(ValueError):  # a window with no in-image tap would divide by zero in ESP-NN
        kernels.avg_pool_s8(img, out_h=2, out_w=1, stride_h=5, stride_w=1, k_h=1, k_w=1, pad_h=0, pad_w=0,
                            act_min=-128, act_max=127)
    with pytest.raises(ValueError):  # filter_ch must divide in_ch
        kernels.conv_s8(np.zeros((2, 2, 3), np.int8), np.zeros((2, 1, 1, 2), np.int8), None,
                        np.full(2, 1 << 30, np.int32), np.zeros(2, np.int32), 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, -128, 127)
    with pytest.raises(ValueError):  # bias length
        kernels.fully_connected_s8(np.zeros(3, np.int8), 0, np.zeros((2, 3), np.int8), 0, np.zeros(3, np.int32),
                                   0, 0, 1 << 30, -128, 127)
