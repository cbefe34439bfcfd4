"""Op groups lowered end to end (EspNNQuantizer, strict mode: nothing left on the
CPU, native delegates, within 1 LSB of the convert_pt2e model): linear, fused
activations, add/mul with broadcasting, softmax, hardswish and the LUT
activations, transposed convolutions, convolutions padded beyond their kernel,
upsampling, slice/pad/cat/split, attention (select, matmul, head split/merge) and the
matmul forms. Models and payload checks: op_cases.py."""

import pytest

pytest.importorskip("executorch")

from op_cases import check_case  # noqa: E402

NAMES = ["linear_relu", "linear_3d", "fused_activations", "add_mul_broadcast", "nhwc_mul_broadcast", "softmax",
         "activations", "transposed_conv", "conv_wide_padding", "upsample", "data_movement",
         "attention", "matmul_forms"]


@pytest.mark.parametrize("name", NAMES)
def test_op_group(name, quantize):
    check_case(name, quantize)


def test_unsupported_forms_stay_on_the_cpu_with_a_reason(quantize):
    """Forms ESP-NN cannot run keep their node on the CPU, and strict mode names it
    with the reason: cropping by a negative pad, a cat of more parts than an op takes."""
    import torch
    import torch.nn.functional as F

    from executorch_espnn import to_espnn_edge

    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return F.pad(x, (-1, 1)), torch.cat([x] * 17, 1)

    x = (torch.randn(1, 2, 3, 4, generator=torch.Generator().manual_seed(1)),)
    ep = torch.export.export(quantize(Unsupported(), x), x)
    with pytest.raises(RuntimeError) as e:
        to_espnn_edge(ep, allow_cpu_fallback=False)
    msg = str(e.value)
    assert "(aten.constant_pad_nd.default): negative padding [-1, 1] (cropping)" in msg
    assert "(aten.cat.default): 17 parts; CONCAT takes at most 16" in msg


def test_resize_tables_use_the_runtime_fraction_bits():
    from executorch_espnn import _native
    from executorch_espnn.lowering.ops.resize_tables import FRAC_BITS

    assert FRAC_BITS == _native.BILINEAR_FRAC_BITS
