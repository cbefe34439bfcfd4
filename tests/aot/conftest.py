"""AOT test fixtures. `quantize` is the one place that picks the quantizer."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402


def _quantizer():
    # Until EspNNQuantizer lands: XNNPACK's symmetric per-channel scheme (the
    # same int8 scheme ESP-NN runs), plus annotations for the few ops it leaves
    # float (softmax, avg_pool2d).
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantizer import ComposableQuantizer

    config = get_symmetric_quantization_config(is_per_channel=True)
    return ComposableQuantizer([XNNPACKQuantizer().set_global(config), _ExtraOps(config)])


class _ExtraOps:
    """Test-only annotator for what XNNPACK's quantizer leaves float: softmax (fixed
    1/256, -128), avg_pool2d (shared qparams), and pooling/mean/clamps reading an
    unannotated value such as a graph input (so that a test can feed an op straight
    from an exactly quantized input)."""

    def __new__(cls, config):
        from torchao.quantization.pt2e.quantizer import (
            FixedQParamsQuantizationSpec,
            QuantizationAnnotation,
            Quantizer,
            SharedQuantizationSpec,
        )

        aten = torch.ops.aten
        SHARED = (aten.avg_pool2d.default, aten.max_pool2d.default, aten.mean.dim,
                  aten.adaptive_avg_pool2d.default, aten.hardtanh.default, aten.relu.default)

        class ExtraOps(Quantizer):
            def annotate(self, gm):
                act = config.input_activation
                softmax_out = FixedQParamsQuantizationSpec(dtype=torch.int8, scale=1.0 / 256.0, zero_point=-128,
                                                           quant_min=-128, quant_max=127,
                                                           qscheme=torch.per_tensor_affine)
                for n in gm.graph.nodes:
                    if n.op != "call_function" or "quantization_annotation" in n.meta:
                        continue
                    x = n.args[0] if n.args else None
                    if n.target in (torch.ops.aten.softmax.int, torch.ops.aten._softmax.default):
                        n.meta["quantization_annotation"] = QuantizationAnnotation(
                            input_qspec_map={x: act}, output_qspec=softmax_out, _annotated=True)
                    elif n.target in SHARED:
                        n.meta["quantization_annotation"] = QuantizationAnnotation(
                            input_qspec_map={x: act}, output_qspec=SharedQuantizationSpec((x, n)), _annotated=True)
                return gm

            def validate(self, gm):
                pass

        return ExtraOps()


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
