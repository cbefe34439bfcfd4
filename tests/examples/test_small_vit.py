"""examples/small_vit.py: the whole ViT in one ESP-NN delegate, the .pte close to int8 PyTorch."""

import re

import pytest

pytest.importorskip("executorch")

from example_harness import host_lsb, run  # noqa: E402


def test_small_vit_runs_in_one_delegate(load_example, capsys, tmp_path):
    out = tmp_path / "small_vit.pte"
    code, text = run(load_example, capsys, "small_vit", "--output", str(out))
    assert code == 0 and "small_vit: OK" in text
    partitions = int(re.search(r"method forward: (\d+) partition\(s\)", text).group(1))
    assert partitions == 1
    assert " x aten." not in text.split("CPU compute ops by kind:")[1]  # none listed
    assert re.search(r"\bFULLY_CONNECTED +9\b", text), text
    assert re.search(r"\bBATCH_MATMUL +4\b", text), text  # q @ k^T and attn @ v, 2 blocks
    assert host_lsb(text) <= 3  # 1 measured; PyTorch's float reference rounds per host
    assert out.read_bytes().count(b"EspNNBackend") >= 1
