"""The kernels binding validates its arguments instead of letting ESP-NN misbehave."""

from __future__ import annotations

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
