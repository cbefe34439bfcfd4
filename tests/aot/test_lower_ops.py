"""Op groups lowered end to end (strict mode, native delegates, within 1 LSB of
the convert_pt2e model): linear, fused activations, add/mul with broadcasting,
softmax. Models and payload checks: op_cases.py."""

import pytest

pytest.importorskip("executorch")

from op_cases import check_case  # noqa: E402

NAMES = ["linear_relu", "linear_3d", "fused_activations", "add_mul_broadcast", "nhwc_mul_broadcast", "softmax"]


@pytest.mark.parametrize("name", NAMES)
def test_op_group(name, quantize):
    check_case(name, quantize)
