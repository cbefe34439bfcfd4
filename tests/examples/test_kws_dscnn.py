"""examples/kws_dscnn.py: DS-CNN on MFCC-shaped input, fully delegated."""

import re

import pytest

pytest.importorskip("executorch")

from example_harness import host_lsb, run  # noqa: E402


def test_kws_dscnn_is_fully_delegated_and_within_1_lsb(load_example, capsys, tmp_path):
    out = tmp_path / "ds_cnn.pte"
    code, text = run(load_example, capsys, "kws_dscnn", "--calibration", "4", "--output", str(out))
    assert code == 0 and "kws_dscnn: OK" in text
    assert "method forward: 1 partition(s)" in text and "0 CPU op(s)" in text
    assert host_lsb(text) <= 1
    assert re.search(r"keyword \(untrained weights, arbitrary\): '(\w+)'", text)
    assert b"EspNNBackend" in out.read_bytes()


def test_kws_features_are_mfcc_shaped(load_example):
    module = load_example("kws_dscnn")
    x = module.features(3, seed=0)
    assert x.shape == (3, 1, 49, 10)  # 1 s at 16 kHz: 49 frames of 40 ms every 20 ms, 10 coefficients
    assert abs(float(x.mean())) < 1e-3 and abs(float(x.std()) - 1) < 0.05
    assert not (module.features(3, seed=1) == x).all()
