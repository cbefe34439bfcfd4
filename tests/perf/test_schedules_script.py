"""benchmarks/schedules.py's models: the dense-prediction ones (issue 27)
build as the figures in docs/performance.md §1b were measured. No lowering
here (test_model_figures.py pins the U-Net's figures)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import schedules  # noqa: E402


def test_dense_prediction_models_are_benchmarked():
    assert {"unet", "lraspp_mobilenet_v3_large"} <= set(schedules.MODELS)
    model, example, calibration = schedules.make_model("unet")
    assert model(*example).shape == (1, 2, 64, 64) and len(calibration) == 4


def test_segmentation_models_export_their_logits_tensor():
    # torchvision's segmentation models return {"out": logits, ...}.
    class Segmenter(torch.nn.Module):
        def forward(self, x):
            return {"out": 2 * x, "aux": x}

    x = torch.randn(1, 3, 4, 4)
    assert torch.equal(schedules._segmentation_logits(Segmenter())(x), 2 * x)


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision not installed")
def test_lraspp_is_torchvisions_with_random_weights():
    model, (x,), _ = schedules.make_model("lraspp_mobilenet_v3_large")
    assert x.shape == (1, 3, 224, 224)
    with torch.no_grad():
        assert model(x).shape == (1, 21, 224, 224)
