"""examples/mobilenet_v2.py: one partition, no compute op on the CPU."""

import re

import pytest

pytest.importorskip("executorch")

from example_harness import host_lsb, run  # noqa: E402


def test_mobilenet_v2_is_one_partition_with_no_cpu_compute(load_example, capsys, tmp_path):
    # Reduced size for speed; the full 224x224 network: tests/aot/test_models.py.
    # 4 LSB measured at this size (narrow layers propagate rounding; 3 at full size).
    out = tmp_path / "mobilenet_v2.pte"
    code, text = run(load_example, capsys, "mobilenet_v2", "--resolution", "96", "--width-mult", "0.5",
                     "--calibration", "2", "--max-lsb", "6", "--output", str(out))
    assert "1 partition(s), 0 CPU compute op(s)" in text
    # 52 convs: 35 dense (1x1 and the stem) and 17 depthwise, as the delegate's op records.
    assert re.search(r"\bCONV2D +35\b", text) and re.search(r"\bDEPTHWISE_CONV2D +17\b", text), text
    assert code == 0 and "mobilenet_v2: OK" in text
    assert host_lsb(text) <= 6
