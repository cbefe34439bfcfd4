"""AOT test fixtures. `quantize` is the one place that picks the quantizer."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402


def _quantizer():
    from executorch_espnn.quantizer import EspNNQuantizer

    return EspNNQuantizer()


def quantize(model, example_inputs, calibration=None):
    """export -> prepare_pt2e -> calibrate -> convert_pt2e; returns the converted GraphModule."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gm = torch.export.export(model.eval(), example_inputs).module(check_guards=False)
    gm = prepare_pt2e(gm, _quantizer())
    for inputs in calibration or [example_inputs]:
        gm(*inputs)
    return convert_pt2e(gm)


@pytest.fixture(scope="session", name="quantize")
def quantize_fixture():
    return quantize
