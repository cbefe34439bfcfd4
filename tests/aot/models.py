"""Reference networks for the end-to-end tests and the one quantization path
they go through (``executorch_espnn.quantize``).

The networks live in the model zoo (`executorch_espnn.models`): `MobileNetV2`
(torchvision's `mobilenet_v2(width_mult=1.0)` layer for layer, 224x224),
`DSCNN` (the MLPerf Tiny keyword-spotting DS-CNN on [N,1,49,10] MFCCs) and
`settle_batch_norm` (a trained network's normalised activations for an
untrained one; its docstring says why the AOT LSB bounds need it). They are
re-exported here so the tests keep their imports.
"""

from __future__ import annotations

from executorch_espnn.models import DSCNN, InvertedResidual, MobileNetV2, conv_bn, settle_batch_norm

__all__ = ["DSCNN", "InvertedResidual", "MobileNetV2", "conv_bn", "espnn_quantize", "settle_batch_norm"]


def espnn_quantize(model, example_inputs, calibration=None, quantizer=None):
    """``executorch_espnn.quantize`` (the convert_pt2e GraphModule), calibrated
    on the example inputs alone when the test gives no calibration."""
    from executorch_espnn import quantize

    return quantize(model, example_inputs, calibration or [example_inputs], quantizer=quantizer)
