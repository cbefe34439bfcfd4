"""examples/small_vit.py: CPU fallback with reasons, the .pte close to int8 PyTorch."""

import re

import pytest

pytest.importorskip("executorch")

from example_harness import host_lsb, run  # noqa: E402


def test_small_vit_falls_back_to_the_cpu_with_reasons(load_example, capsys, tmp_path):
    out = tmp_path / "small_vit.pte"
    code, text = run(load_example, capsys, "small_vit", "--output", str(out))
    assert code == 0 and "small_vit: OK" in text
    partitions = int(re.search(r"method forward: (\d+) partition\(s\)", text).group(1))
    assert partitions > 1  # delegates with CPU ops between them
    assert "layer_norm" not in text.split("CPU compute ops by kind:")[1]  # all 5 delegated (LAYER_NORM)
    assert re.search(r"\d+ x aten\.bmm\.default: no ESP-NN lowering", text)
    assert "aten.linear.default                                  9" in text
    assert host_lsb(text) <= 3  # float CPU islands between delegates: 1-2 measured, depending on the host
    assert out.read_bytes().count(b"EspNNBackend") >= 1
