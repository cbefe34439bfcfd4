"""The memory and SIMD figures the zoo models must reach, lowered end to end
(executorch_espnn.quantize -> to_espnn_edge), from the delegate
payloads by executorch_espnn.analysis:

* DS-CNN (MLPerf Tiny KWS): activation arena <= 16,000 bytes, TFLite Micro's
  activation arena for that model (measured with the tflite-micro wheel's print_allocations(); docs/performance.md). Measured:
  16,000 bytes, equal to the lower bound for its op order (two 25x5x64 int8
  maps live together).
* MobileNetV2-1.0-224: arena within 5 % of the lower bound, and >= 90 % of
  the MACs on ESP32-S3 SIMD paths by ESP-NN 1.2.3's documented dispatch
  rules (analysis/s3_dispatch.py). Measured: 1,505,280 = bound; 100 %.

These are static figures (bytes and MAC counts), not device measurements.
MobileNetV2 takes most of this file's time (export + quantize + lower).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from executorch_espnn import delegate_payloads, models, quantize, to_espnn_edge  # noqa: E402
from executorch_espnn.analysis import payload_metrics  # noqa: E402

TFLM_DS_CNN_ACTIVATION_ARENA = 16_000


def lowered_metrics(model, example):
    converted = quantize(model, example, [example])
    edge = to_espnn_edge(torch.export.export(converted, example), allow_cpu_fallback=False)
    blobs = delegate_payloads(edge)
    assert len(blobs) == 1, "expected the whole model in one ESP-NN partition"
    return payload_metrics(blobs[0])


def test_ds_cnn_activation_arena_fits_tflm_figure():
    pm = lowered_metrics(*models.ds_cnn())
    print(f"DS-CNN: arena {pm.arena_bytes} B, lower bound {pm.arena_lower_bound} B, {pm.macs} MACs, "
          f"S3 SIMD {100 * pm.s3_simd_fraction:.1f}%")
    assert pm.arena_lower_bound == 16_000  # 2 x 25*5*64: a depthwise input and output
    assert pm.arena_bytes <= TFLM_DS_CNN_ACTIVATION_ARENA
    assert pm.macs == 2_656_768  # MLPerf Tiny DS-CNN: 2.66 M (anchors.md)


def test_mobilenet_v2_arena_near_bound_and_simd_share():
    pm = lowered_metrics(*models.mobilenet_v2())
    print(f"MobileNetV2: arena {pm.arena_bytes} B, lower bound {pm.arena_lower_bound} B, {pm.macs} MACs, "
          f"S3 SIMD {100 * pm.s3_simd_fraction:.1f}%")
    assert pm.arena_bytes <= 1.05 * pm.arena_lower_bound
    assert pm.s3_simd_fraction >= 0.90
    assert 290e6 < pm.macs < 310e6  # ~300 M MACs (anchors.md)
